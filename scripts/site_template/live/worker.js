// pagedlab's Python, in a module Web Worker: Pyodide (site/_static/pyodide/, from the npm
// package pinned in package.json) and pagedlab's pure sources (sources.json, written by
// scripts/build_site.py). Nothing is fetched from anywhere but this page's own origin.
//
// Messages in:  {id, op: "render" | "play", explorer, settings} | {id, op: "grade", exercise, code, prelude}
// Messages out: {op: "ready", exercises, explorers, ms} once, then {id, ...result, ms}
//               per request; {op: "failed", error} if Python could not start.
import { loadPyodide } from "../pyodide/pyodide.mjs";

const SRC = "/home/pyodide/pagedlab-src";

async function start() {
  const begin = performance.now();
  const pyodide = await loadPyodide({ indexURL: new URL("../pyodide/", import.meta.url).href });
  const response = await fetch(new URL("sources.json", import.meta.url));
  if (!response.ok) throw new Error(`sources.json: HTTP ${response.status}`);
  const sources = await response.json();
  for (const [path, text] of Object.entries(sources)) {
    const dir = `${SRC}/${path}`.split("/").slice(0, -1).join("/");
    pyodide.FS.mkdirTree(dir);
    pyodide.FS.writeFile(`${SRC}/${path}`, text);
  }
  pyodide.runPython(`import sys; sys.path.insert(0, ${JSON.stringify(SRC)})`);
  const live = pyodide.pyimport("pagedlab.explorers.site.live");
  const json = pyodide.pyimport("json");
  const call = (fn, ...args) => JSON.parse(json.dumps(fn(...args)));
  const exercises = call(live.exercise_names);
  const explorers = call(pyodide.runPython("lambda: list(__import__('pagedlab.explorers.site.live', fromlist=['EXPLORERS']).EXPLORERS)"));
  return { pyodide, live, json, call, exercises, explorers, ms: performance.now() - begin };
}

let ready;
try {
  ready = await start();
  postMessage({ op: "ready", exercises: ready.exercises, explorers: ready.explorers, ms: ready.ms });
} catch (error) {
  postMessage({ op: "failed", error: String(error && error.message ? error.message : error) });
}

onmessage = (event) => {
  const { id, op } = event.data;
  const begin = performance.now();
  let result;
  try {
    if (op === "render") {
      const settings = ready.pyodide.toPy(event.data.settings);
      result = ready.call(ready.live.render, event.data.explorer, settings);
      settings.destroy();
    } else if (op === "play") {
      const settings = ready.pyodide.toPy(event.data.settings);
      result = ready.call(ready.live.play, event.data.explorer, settings);
      settings.destroy();
    } else if (op === "grade") {
      const { exercise, code, prelude } = event.data;
      result = ready.call(ready.live.grade, exercise, code, prelude || "");
    } else {
      result = { error: `unknown op ${op}` };
    }
  } catch (error) {
    result = { error: String(error && error.message ? error.message : error) };
  }
  postMessage({ id, ms: performance.now() - begin, ...result });
};
