"""Running the app for a room: several Streamlit processes behind nginx (`python3 tasks.py serve`)."""
