// Rollouts: per run and split, an iteration slider; the reward histogram; trajectories sorted
// by reward; a trajectory opens its conversation(s) by role (tool calls and long messages
// collapsible); a search over every message of every run (the `transcripts` view).
import { h, clear, get, url, table, errorBox, plotly, runPicker, focusRun, fmt, debounce } from "../lib.js";

const LONG = 1200; // characters shown before a message is collapsed

function objects(t) { return t.rows.map((r) => Object.fromEntries(t.columns.map((c, i) => [c, r[i]]))); }

export function renderMessage(m) {
  const text = m.content ?? "";
  const content = h("div", { class: "content" });
  const long = text.length > LONG || text.split("\n").length > 30;
  const full = () => { content.textContent = text; };
  if (long) {
    content.textContent = text.slice(0, 600);
    content.append(h("span", { class: "muted" }, " …"));
  } else full();
  const more = long ? h("button", { class: "small more", onclick: (e) => {
    const open = e.target.dataset.open === "1";
    if (open) { content.textContent = text.slice(0, 600); content.append(h("span", { class: "muted" }, " …")); e.target.textContent = `show all (${text.length} characters)`; e.target.dataset.open = "0"; }
    else { full(); e.target.textContent = "collapse"; e.target.dataset.open = "1"; }
  } }, `show all (${text.length} characters)`) : null;
  const calls = Array.isArray(m.tool_calls) ? m.tool_calls : (m.tool_calls ? [m.tool_calls] : []);
  const callEls = calls.map((c) => {
    const fn = c && (c.function || c);
    const name = (fn && fn.name) || (c && c.type) || "call";
    let args = fn && (fn.arguments ?? fn.args ?? fn.input);
    if (typeof args === "string") { try { args = JSON.parse(args); } catch (e) { /* keep text */ } }
    const shown = typeof args === "string" ? args : JSON.stringify(args ?? c, null, 2);
    const short = (typeof args === "string" ? args : JSON.stringify(args ?? {})).slice(0, 90);
    return h("details", { class: "toolcall" }, h("summary", {}, `⚙ ${name}(${short}${short.length >= 90 ? "…" : ""})`), h("pre", {}, shown));
  });
  return h("div", { class: "msg " + (m.role || ""), dataset: { role: m.role || "" } },
    h("div", { class: "role" }, m.role || "?", m.name ? ` · ${m.name}` : "", m.tool_call_id ? ` · answers ${m.tool_call_id}` : ""),
    content, more, callEls);
}

export async function mount(root) {
  const head = h("div", { class: "toolbar" });
  const searchBox = h("input", { type: "search", id: "msg-search", placeholder: "search every message of every run…", size: 40, value: url.get("search", "") });
  const roleSel = h("select", { id: "msg-role" }, ["", "system", "user", "assistant", "tool"].map((r) => h("option", { value: r, selected: url.get("role", "") === r }, r || "any role")));
  const hits = h("div", { id: "search-results" });
  const left = h("div", {});
  const right = h("div", { class: "conv", id: "conversation" });
  root.append(h("h1", {}, "Rollouts"), head,
    h("div", { class: "toolbar" }, searchBox, roleSel), hits,
    h("div", { class: "rollouts-layout" }, left, right));

  let runs = [];
  const plotlyReady = plotly(); // loads while the runs are asked for
  plotlyReady.catch(() => {}); // a failed load is reported where it is awaited
  try { runs = (await get("rollouts/runs")).rows.map((r) => r[1]); } catch (e) { root.append(errorBox(e)); return {}; }
  const P = await plotlyReady;
  let run = focusRun(runs);
  if (!runs.includes(run)) run = runs[0];

  async function search() {
    clear(hits);
    const q = searchBox.value.trim();
    url.set({ search: q, role: roleSel.value });
    if (!q) return;
    let res;
    try { res = await get("search", { q, role: roleSel.value }); } catch (e) { hits.append(errorBox(e)); return; }
    const list = h("div", { class: "table-wrap", style: { maxHeight: "260px", marginBottom: "12px" } });
    const t = h("table", { class: "data" }, h("thead", {}, h("tr", {}, ["run", "split", "iter", "group.traj", "reward", "role", "match"].map((c) => h("th", {}, c)))));
    const body = h("tbody");
    for (const r of res.rows) {
      const snip = h("span", { class: "snip" }, r.snippet.before, h("mark", {}, r.snippet.match), r.snippet.after);
      const tr = h("tr", { class: "clickable hit" },
        h("td", { class: "name" }, r.run_label), h("td", {}, r.split), h("td", { class: "num" }, r.iteration),
        h("td", { class: "num" }, r.group_idx === null ? "–" : `${r.group_idx}.${r.traj_idx ?? "?"}`),
        h("td", { class: "num" }, fmt(r.total_reward)), h("td", {}, r.role), h("td", { style: { whiteSpace: "normal", minWidth: "420px" } }, snip));
      tr.addEventListener("click", () => {
        run = r.run_label;
        url.set({ focus: r.run_label, split: r.split, iteration: r.iteration,
          traj: r.traj_idx !== null && r.group_idx !== null ? `${r.group_idx}.${r.traj_idx}` : null, conv: r.conversation_id });
        load();
      });
      body.append(tr);
    }
    t.append(body); list.append(t);
    hits.append(h("div", { class: "sub", id: "search-count" }, `${res.total} message${res.total === 1 ? "" : "s"} contain “${q}”` + (res.truncated ? ` · showing ${res.rows.length}` : "")), list);
  }
  searchBox.addEventListener("input", debounce(search, 250));
  roleSel.addEventListener("change", search);

  async function openConversation(params) {
    clear(right);
    let res;
    try { res = await get("rollouts/conversation", { run, ...params }); } catch (e) { right.append(errorBox(e)); return; }
    if (!res.conversations.length) { right.append(h("div", { class: "empty" }, "no transcript was logged for this trajectory (logtree)")); return; }
    if (!res.exact) right.append(h("div", { class: "sub" }, "the logtree names this trajectory's group but not the trajectory: the group's conversations"));
    for (const c of res.conversations) {
      right.append(h("div", { class: "conv-head" }, h("b", {}, c.section || "conversation"), ` · ${c.split} · iteration ${c.iteration}`,
        c.group_idx !== null ? ` · group ${c.group_idx}` : "", c.traj_idx !== null ? ` traj ${c.traj_idx}` : "",
        ` · ${c.messages.length} messages`));
      for (const m of c.messages) right.append(renderMessage(m));
    }
    right.dataset.loaded = JSON.stringify(params);
  }

  async function load() {
    clear(head); clear(left); clear(right);
    if (!runs.length) { left.append(h("div", { class: "empty" }, "no run has rollout summaries or logtree transcripts")); return; }
    head.append(h("label", {}, "run", runPicker(runs, run, (v) => { run = v; url.set({ focus: v, split: null, iteration: null, traj: null, conv: null }); load(); })));
    let index;
    try { index = objects(await get("rollouts/index", { run })); } catch (e) { left.append(errorBox(e)); return; }
    const splits = [...new Set(index.map((r) => r.split))];
    let split = url.get("split");
    if (!splits.includes(split)) split = splits.includes("train") ? "train" : splits[0];
    const iters = index.filter((r) => r.split === split);
    let iteration = parseInt(url.get("iteration"), 10);
    const itNums = iters.map((r) => r.iteration);
    if (!itNums.includes(iteration)) iteration = itNums[itNums.length - 1];
    const splitSel = h("select", { id: "split-picker", onchange: () => { url.set({ split: splitSel.value, iteration: null, traj: null, conv: null }); load(); } },
      splits.map((s) => h("option", { value: s, selected: s === split }, s)));
    const slider = h("input", { type: "range", id: "iteration-slider", min: 0, max: Math.max(0, itNums.length - 1), step: 1, value: Math.max(0, itNums.indexOf(iteration)) });
    const label = h("span", { class: "mono", id: "iteration-label" });
    const itInfo = (i) => {
      const r = iters[i];
      return r ? `iteration ${r.iteration} · ${r.n_trajectories} trajectories · ${r.n_conversations} transcripts` : "";
    };
    label.textContent = itInfo(itNums.indexOf(iteration));
    slider.addEventListener("input", () => { label.textContent = itInfo(parseInt(slider.value, 10)); });
    slider.addEventListener("change", () => { url.set({ iteration: itNums[parseInt(slider.value, 10)], traj: null, conv: null }); load(); });
    head.append(h("label", {}, "split", splitSel), h("span", { class: "slider" }, "iteration", slider, label));
    if (iteration === undefined || isNaN(iteration)) return;
    url.set({ focus: run, split, iteration });

    const where = { run, split, iteration };
    const [traj, convs] = await Promise.all([get("rollouts/trajectories", where), get("rollouts/conversations", where)]);
    const rows = objects(traj);
    const hist = h("div", { class: "hist", id: "reward-hist" });
    left.append(h("div", { class: "panel" }, h("div", { class: "head" }, h("span", { class: "title" }, "total_reward"),
      h("span", { class: "note" }, `${rows.length} trajectories at iteration ${iteration}`)), hist));
    if (rows.length) {
      P.newPlot(hist, [{ type: "histogram", x: rows.map((r) => r.total_reward).filter((v) => typeof v === "number"), marker: { color: "#7ea6e0" }, nbinsx: 30 }],
        { margin: { l: 36, r: 8, t: 6, b: 26 }, bargap: 0.05, plot_bgcolor: "#fff" }, { displayModeBar: false, responsive: true });
    }
    const desc = url.get("order") === "desc";
    const current = url.get("traj");
    const t = { columns: ["group.traj", "total_reward", "final", "steps", "tags", "transcripts"],
      types: ["varchar", "double", "double", "int64", "varchar", "int64"],
      rows: rows.map((r) => [`${r.group_idx}.${r.traj_idx}`, r.total_reward, r.final_reward, r.n_steps,
        (r.tags || []).join(","), r.conversations_of === "group" ? -r.n_conversations : r.n_conversations]) };
    const order = h("button", { class: "small", id: "traj-order", onclick: () => { url.set({ order: desc ? null : "desc" }); load(); } },
      desc ? "highest reward first" : "lowest reward first");
    left.append(h("div", { class: "toolbar", style: { marginTop: "10px" } }, h("b", {}, "Trajectories"), order),
      h("div", { id: "trajectories" }, table(t, {
        sort: 1, desc, tall: true,
        onSort: (i, d) => { if (i === 1) { url.set({ order: d ? "desc" : null }); load(); } },
        render: { transcripts: (v) => v > 0 ? String(v) : v < 0 ? h("span", { class: "muted", title: "the group's conversations" }, `group: ${-v}`) : h("span", { class: "muted" }, "–") },
        rowClass: (r) => r[0] === current ? "current" : "",
        onRow: (r) => {
          const [g, tr] = r[0].split(".").map((x) => parseInt(x, 10));
          url.set({ traj: r[0], conv: null });
          for (const el of left.querySelectorAll("tr.current")) el.classList.remove("current");
          openConversation({ split, iteration, group: g, traj: tr });
        },
      })));
    const others = objects(convs).filter((c) => c.traj_idx === null);
    if (others.length) {
      left.append(h("h2", {}, "Conversations not tied to one trajectory"),
        h("div", {}, others.map((c) => h("div", {}, h("a", { href: "#", onclick: (e) => { e.preventDefault(); url.set({ conv: c.conversation_id, traj: null }); openConversation({ id: c.conversation_id }); } },
          `${c.section || c.conversation_id}`), h("span", { class: "sub" }, ` group ${c.group_idx ?? "–"} · ${c.n_messages} messages`)))));
    }
    if (url.get("conv") && !current) await openConversation({ id: url.get("conv") });
    else if (current) {
      const [g, tr] = current.split(".").map((x) => parseInt(x, 10));
      await openConversation({ split, iteration, group: g, traj: tr });
    } else right.append(h("div", { class: "empty" }, "pick a trajectory to read its conversation"));
  }

  await load();
  if (searchBox.value) await search();
  return { refresh: load };
}
