"""The frame every page runs in: navigation and the page table, the sidebar and the scenario it
binds to the URL (one codec), judging links, uploads, the seeds per figure, languages.
"""
