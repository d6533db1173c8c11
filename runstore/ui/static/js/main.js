// The page frame: picks the page from the path, keeps the run selection in every nav link,
// and tells the page to refresh its data when the server reports a new store snapshot.
import { h, clear, url, selectedRuns, errorBox } from "./lib.js";

const PAGES = {
  runs: () => import("./pages/runs.js"),
  charts: () => import("./pages/charts.js"),
  compare: () => import("./pages/compare.js"),
  health: () => import("./pages/health.js"),
  sql: () => import("./pages/sql.js"),
  checkpoints: () => import("./pages/checkpoints.js"),
  timing: () => import("./pages/timing.js"),
  rollouts: () => import("./pages/rollouts.js"),
};

const state = { page: null, name: null, snapshot: null };
window.runstore = state; // tests and the curious can read the snapshot the page shows

function pageName() {
  const name = location.pathname.replace(/^\/+|\/+$/g, "") || "runs";
  return PAGES[name] ? name : "runs";
}

function updateNav() {
  const runs = selectedRuns();
  for (const a of document.querySelectorAll("#nav a")) {
    const p = new URLSearchParams();
    runs.forEach((r) => p.append("run", r));
    a.href = "/" + a.dataset.page + (runs.length ? "?" + p : "");
    a.classList.toggle("active", a.dataset.page === state.name);
  }
  const sel = document.getElementById("selection");
  clear(sel);
  if (runs.length) {
    sel.append(h("span", { id: "selection-count", title: runs.join("\n") },
      `${runs.length} run${runs.length === 1 ? "" : "s"} selected`),
      h("button", { class: "small", onclick: () => url.set({ run: null }) }, "clear"));
  }
}

async function mount() {
  state.name = pageName();
  updateNav();
  const root = document.getElementById("page");
  clear(root);
  try {
    const mod = await PAGES[state.name]();
    state.page = await mod.mount(root);
  } catch (e) {
    root.append(errorBox(e));
  }
  document.body.dataset.ready = state.name;
}

function live() {
  const status = document.getElementById("status");
  const text = document.getElementById("status-text");
  const es = new EventSource("/api/events");
  es.addEventListener("snapshot", async (ev) => {
    const { snapshot } = JSON.parse(ev.data);
    status.className = "status live";
    const first = state.snapshot === null;
    const changed = !first && snapshot !== state.snapshot;
    state.snapshot = snapshot;
    text.textContent = `snapshot ${snapshot ?? "–"}`;
    status.title = `store snapshot ${snapshot}; pages refresh when a new one lands`;
    if (changed && state.page && state.page.refresh) {
      status.className = "status fresh";
      text.textContent = `snapshot ${snapshot} · updated ${new Date().toLocaleTimeString()}`;
      try { await state.page.refresh(); } catch (e) { console.error(e); }
      document.body.dataset.refreshed = String(snapshot);
      setTimeout(() => { status.className = "status live"; }, 1500);
    }
  });
  es.onerror = () => { status.className = "status down"; text.textContent = "reconnecting…"; };
}

window.addEventListener("runstore:url", updateNav);
window.addEventListener("popstate", () => mount());
document.addEventListener("click", (e) => {
  // Nav links switch pages without a reload (the event stream stays open).
  const a = e.target.closest && e.target.closest("a[data-page], a[data-nav]");
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  const target = new URL(a.href, location.href);
  if (target.origin !== location.origin) return;
  e.preventDefault();
  history.pushState(null, "", target.pathname + target.search);
  mount();
});

live();
mount();
