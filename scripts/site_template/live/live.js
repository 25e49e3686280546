// The live site: progressive enhancement of a static pagedlab page.
//
// The page shows its pre-rendered frames at once. Served over http(s), this script starts
// Python in a module Web Worker (worker.js: Pyodide and pagedlab's pure sources, all from
// this site); once it runs, <body data-live-ready> is set, every live explorer's inputs
// ([data-explorer] input[data-control]) switch on and redraw from the real allocator, and
// every exercise whose grader needs no torch is graded in the page. Stop ends a runaway
// learner function: it terminates the worker and starts a fresh one. Opened from disk
// (file://) browsers run no module worker: the page keeps its frames and says why.
(function () {
  "use strict";
  const here = document.currentScript ? document.currentScript.src : location.href;
  const WORKER_URL = new URL("worker.js", here);
  let worker = null;
  let ready = false;
  let nextId = 1;
  const pending = new Map(); // id -> {resolve, exercise}
  let gradable = [];
  let restarted = false; // after a Stop: do not redraw what was stopped until an input moves
  const started = performance.now();

  function statusAll(text) {
    for (const el of document.querySelectorAll("[data-live-status]")) el.textContent = text;
    const bar = document.getElementById("pagedlab-live-bar");
    if (bar) bar.querySelector("span").textContent = text;
  }

  function bar() {
    const el = document.createElement("div");
    el.id = "pagedlab-live-bar";
    el.innerHTML = '<span></span> <button type="button" data-live-stop disabled ' +
      'title="end what Python is running now (it restarts)">Stop</button>';
    el.querySelector("button").addEventListener("click", () => stop());
    document.body.prepend(el);
  }

  function busy() {
    // The bar's Stop is on while Python works on something (a render or a grade).
    const button = document.querySelector("#pagedlab-live-bar button[data-live-stop]");
    if (button) button.disabled = pending.size === 0;
  }

  function request(message, exercise) {
    const id = nextId++;
    return new Promise((resolve) => {
      pending.set(id, { resolve, exercise });
      busy();
      worker.postMessage({ id, ...message });
    });
  }

  function startWorker() {
    ready = false;
    document.body.removeAttribute("data-live-ready");
    const begin = performance.now();
    worker = new Worker(WORKER_URL, { type: "module" });
    worker.onmessage = (event) => {
      const data = event.data;
      if (data.op === "ready") {
        ready = true;
        gradable = data.exercises;
        const seconds = ((performance.now() - begin) / 1000).toFixed(1);
        document.body.dataset.liveReadyMs = String(Math.round(performance.now() - started));
        document.body.setAttribute("data-live-ready", "");
        statusAll(`Live: Python runs in this page (ready in ${seconds} s). Inputs below drive the real pagedlab.`);
        enable();
        return;
      }
      if (data.op === "failed") {
        statusAll(`Not live: Python did not start in this page (${data.error}). The pre-rendered frames above still work.`);
        return;
      }
      const waiting = pending.get(data.id);
      if (waiting) {
        pending.delete(data.id);
        busy();
        waiting.resolve(data);
      }
    };
    worker.onerror = (event) => {
      statusAll(`Not live: the Python worker failed (${event.message || "could not load"}). The pre-rendered frames above still work.`);
    };
  }

  function stop() {
    // Terminate the worker: a loop inside one C call cannot be interrupted any other way.
    worker.terminate();
    for (const [id, waiting] of pending) {
      if (waiting.exercise) {
        waiting.resolve({ status: "failed", stopped: true,
          message: `✗ ${waiting.exercise}: stopped (Stop pressed); Python restarts in a few seconds` });
      } else {
        waiting.resolve({ error: "stopped (Stop pressed); Python restarts in a few seconds" });
      }
      pending.delete(id);
    }
    busy();
    restarted = true;
    statusAll("Restarting Python after Stop…");
    disable();
    startWorker();
  }

  function disable() {
    for (const el of document.querySelectorAll("[data-explorer] input[data-control], [data-explorer] button[data-play], textarea[data-exercise], button[data-check], button[data-stop]")) {
      el.disabled = true;
    }
  }

  function settingsOf(panel) {
    const settings = {};
    for (const input of panel.querySelectorAll("input[data-control]")) {
      settings[input.dataset.control] = input.type === "checkbox" ? input.checked : input.value;
    }
    return settings;
  }

  async function redraw(panel) {
    if (!ready) return;
    const begin = performance.now();
    const explorer = panel.dataset.explorer;
    const result = await request({ op: "render", explorer, settings: settingsOf(panel) });
    if (result.error) {
      panel.querySelector("[data-readout]").textContent = `✗ ${result.error}`;
      return;
    }
    panel.querySelector("[data-readout]").innerHTML = result.readout;
    if (result.ok) panel.querySelector("[data-picture]").innerHTML = result.svg;
    panel.dataset.renderMs = result.ms.toFixed(1); // in the worker: render + SVG
    panel.dataset.roundTripMs = (performance.now() - begin).toFixed(1); // input -> page updated
  }

  // Play: the explorer's declared Play (pagedlab.explorers.views.controls.Play). Python says which
  // values one press shows (live.play: the mode and the values, as in the notebook's widget);
  // the page sets the axis's input to each in turn and redraws. Pressed again, or an input
  // moved by hand, it stops where it is.
  const playing = new Map(); // panel -> {stopped}
  async function play(panel, button) {
    if (playing.has(panel)) {
      playing.get(panel).stopped = true;
      return;
    }
    const run = { stopped: false };
    const result = await request({ op: "play", explorer: panel.dataset.explorer, settings: settingsOf(panel) });
    if (result.error || !result.ok) {
      panel.querySelector("[data-readout]").innerHTML = result.readout || `✗ ${result.error}`;
      return;
    }
    playing.set(panel, run);
    button.textContent = "stop";
    const input = panel.querySelector(`input[data-control="${CSS.escape(result.axis)}"]`);
    const stopOnHand = () => { run.stopped = true; };
    for (const other of panel.querySelectorAll("input[data-control]")) other.addEventListener("input", stopOnHand);
    try {
      for (const value of result.values) {
        if (run.stopped || !ready) break;
        const begin = performance.now();
        if (input.type === "checkbox") input.checked = Boolean(value);
        else input.value = String(value);
        await redraw(panel);
        const wait = result.interval_ms - (performance.now() - begin);
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      }
    } finally {
      for (const other of panel.querySelectorAll("input[data-control]")) other.removeEventListener("input", stopOnHand);
      playing.delete(panel);
      button.textContent = "play";
      panel.dataset.played = result.values.map(String).join(",");
    }
  }

  async function check(name) {
    const block = document.querySelector(`[data-exercise-block="${CSS.escape(name)}"]`);
    const out = block.querySelector(`[data-result="${CSS.escape(name)}"]`);
    const button = block.querySelector(`button[data-check="${CSS.escape(name)}"]`);
    const stopButton = block.querySelector(`button[data-stop="${CSS.escape(name)}"]`);
    out.textContent = "checking…";
    button.disabled = true;
    stopButton.disabled = false;
    const code = block.querySelector(`textarea[data-exercise="${CSS.escape(name)}"]`).value;
    const imports = document.getElementById("pagedlab-notebook-imports"); // as instructor mode
    const prelude = imports ? imports.textContent : "";
    const result = await request({ op: "grade", exercise: name, code, prelude }, name);
    out.textContent = result.error ? `✗ ${name}: ${result.error}` : result.message;
    out.dataset.status = result.status || "failed";
    stopButton.disabled = true;
    if (ready) button.disabled = false;
  }

  function enable() {
    for (const panel of document.querySelectorAll("[data-explorer]")) {
      for (const input of panel.querySelectorAll("input[data-control]")) {
        input.disabled = false;
        if (!input.dataset.bound) {
          input.dataset.bound = "1";
          input.addEventListener("input", () => redraw(panel));
          input.addEventListener("change", () => redraw(panel));
        }
      }
      const playButton = panel.querySelector("button[data-play]");
      if (playButton) {
        playButton.disabled = false;
        if (!playButton.dataset.bound) {
          playButton.dataset.bound = "1";
          playButton.addEventListener("click", () => play(panel, playButton));
        }
      }
      if (!restarted) redraw(panel);
    }
    for (const block of document.querySelectorAll("[data-exercise-block]")) {
      const name = block.dataset.exerciseBlock;
      const status = block.querySelector("[data-live-status]");
      const button = block.querySelector("button[data-check]");
      const stopButton = block.querySelector("button[data-stop]");
      if (!gradable.includes(name)) {
        status.textContent = "This exercise's grader needs torch: check it in JupyterLab.";
        continue;
      }
      status.textContent = "Live: edit the function and press Check; the notebook's own grader runs in this page.";
      block.querySelector("textarea").disabled = false;
      button.disabled = false;
      if (!button.dataset.bound) {
        button.dataset.bound = "1";
        button.addEventListener("click", () => check(name));
        stopButton.addEventListener("click", () => stop());
      }
    }
  }

  function main() {
    bar();
    if (location.protocol === "file:") {
      document.body.dataset.liveUnavailable = "file";
      statusAll("Not live: this page was opened from a file, and browsers run no Web Worker there. " +
        "The pre-rendered frames work; serve the folder (python -m http.server) to run Python in the page.");
      return;
    }
    if (typeof Worker === "undefined" || typeof WebAssembly === "undefined") {
      statusAll("Not live: this browser has no Web Workers or WebAssembly. The pre-rendered frames still work.");
      return;
    }
    statusAll("Starting Python in this page (Pyodide, about 13 MB the first time)…");
    startWorker();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
  else main();
})();
