// One run per slider key sequence (ui/layout.py::one_run_per_key_sequence says why).
// While an arrow, Page or Home/End key is held on a slider, the page's "rerun the script" messages
// (BackMsg.rerun_script, field 11: first byte 0x5A) are held back, each newer one replacing the older;
// when the key is released (and no other press follows within 100 ms) the last one is sent. Every
// other message goes at once. The slider moves and its URL parameter follows as before: only the
// runs in between are skipped. window.__labSliderRuns counts the runs sent this way (for tests).
(() => {
  if (window.__labSliderKeys) return;
  window.__labSliderKeys = true;
  window.__labSliderRuns = 0;
  const KEYS = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "PageUp", "PageDown", "Home", "End"]);
  const send = WebSocket.prototype.send;
  let holding = false, held = null, timer = null;
  const isRerun = (data) => {
    try {
      const b = data instanceof ArrayBuffer ? new Uint8Array(data, 0, 1) : new Uint8Array(data.buffer, data.byteOffset, 1);
      return b[0] === 0x5a;
    } catch (e) {
      return false;
    }
  };
  WebSocket.prototype.send = function (data) {
    if (holding && isRerun(data)) {
      held = [this, data];
      return;
    }
    return send.call(this, data);
  };
  const flush = () => {
    holding = false;
    clearTimeout(timer);
    const last = held;
    held = null;
    if (last && last[0].readyState === WebSocket.OPEN) {
      window.__labSliderRuns += 1;
      send.call(last[0], last[1]);
    }
  };
  const onSlider = (e) => e.target && e.target.closest && e.target.closest('[data-testid="stSlider"]');
  document.addEventListener("keydown", (e) => {
    if (KEYS.has(e.key) && onSlider(e)) {
      holding = true;
      clearTimeout(timer);
      timer = setTimeout(flush, 5000); // a key never released (focus lost): send anyway
    }
  }, true);
  document.addEventListener("keyup", (e) => {
    if (holding && KEYS.has(e.key)) {
      clearTimeout(timer);
      timer = setTimeout(flush, 100);
    }
  }, true);
  window.addEventListener("blur", () => holding && flush());
})();
