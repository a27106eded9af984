// The report page's behaviour: draws the Plotly figures and runs the rollout viewer.
// Data comes from the page's JSON blocks; every text from a run is added as a text node
// (never as HTML), so observations and actions show exactly as the run saw them.
(function () {
  "use strict";

  function readJson(id) {
    const node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : null;
  }

  // el("td", {class: "num"}, "1.0"): an element whose children are nodes or text
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else if (key === "title") node.title = value;
      else if (key === "background") node.style.backgroundColor = value;
      else if (key === "click") node.addEventListener("click", value);
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      node.append(child instanceof Node ? child : document.createTextNode(
        child === null || child === undefined ? "" : String(child)));
    }
    return node;
  }

  function fmt(value) {
    if (value === null || value === undefined) return "—";
    if (typeof value !== "number") return String(value);
    if (Number.isInteger(value)) return String(value);
    return Math.abs(value) >= 100 ? value.toFixed(1) : value.toFixed(3);
  }

  function table(header, rows, rowClass, rowTitle) {
    const head = el("tr", {}, ...header.map((h) => el("th", {}, h)));
    const body = rows.map((row, i) => el("tr", {class: rowClass ? rowClass(i) : "",
                                                title: rowTitle ? rowTitle(i) : ""},
      ...row.map((cell) => el("td", {class: typeof cell === "number" ? "num" : ""}, fmt(cell)))));
    return el("div", {class: "table-wrap"}, el("table", {}, head, ...body));
  }

  // CURVES

  for (const figure of readJson("report-figures") || []) {
    Plotly.newPlot(document.getElementById(figure.id), figure.figure.data, figure.figure.layout,
                   {displaylogo: false, responsive: true});
  }

  // ROLLOUT VIEWER

  const viewer = readJson("report-viewer");
  const root = document.getElementById("viewer");
  if (!viewer || !root || viewer.runs.length === 0) {
    document.body.dataset.ready = "1";
    return;
  }
  const pickRun = document.getElementById("viewer-run");
  const pickUpdate = document.getElementById("viewer-update");
  const pickGroup = document.getElementById("viewer-group");
  const list = document.getElementById("viewer-rollouts");
  const detail = document.getElementById("viewer-detail");
  const truthBox = document.getElementById("viewer-truth");

  function fill(select, labels) {
    select.replaceChildren(...labels.map((label, i) => el("option", {value: String(i)}, label)));
  }

  function currentUpdate() {
    return viewer.runs[+pickRun.value].updates[+pickUpdate.value];
  }

  function currentGroup() {
    return currentUpdate().groups[+pickGroup.value];
  }

  // a run opens on the group viewer.py chose (the first with signal); another update on its
  // first group with signal
  function chooseRun() {
    const run = viewer.runs[+pickRun.value];
    fill(pickUpdate, run.updates.map((u) => `update ${u.update}`));
    pickUpdate.value = String(run.open[0]);
    showUpdate(run.open[1]);
  }

  function chooseUpdate() {
    const first = currentUpdate().groups.findIndex((g) => g.signal);
    showUpdate(Math.max(first, 0));
  }

  function showUpdate(group) {
    const update = currentUpdate();
    fill(pickGroup, update.groups.map((g) =>
      `group ${g.group_id}: ${g.task_id} (${g.task_type}), ${g.won}/${g.rollouts.length} won` +
      (g.signal ? "" : ", no signal")));
    pickGroup.value = String(group);
    chooseGroup();
  }

  // the group's step credit against the solver truth g_t, one point per step and a colour
  // per rollout; an update saved without the truth says how to get it
  function showTruth(update, group) {
    if (!update.truth) {
      truthBox.replaceChildren(el("p", {class: "muted", id: "viewer-no-truth"}, viewer.no_truth));
      return;
    }
    const plot = el("div", {class: "truth-plot", id: "viewer-truth-plot"});
    truthBox.replaceChildren(plot);
    const data = group.rollouts.map((rollout) => {
      const points = rollout.steps.map((step, t) => [step, t])
        .filter(([step]) => step.truth !== null && step.advantage !== null);
      return {type: "scatter", mode: "markers", marker: {size: 9, opacity: 0.75},
              name: `rollout ${rollout.rollout}` + (rollout.won ? " (won)" : ""),
              x: points.map(([step]) => step.truth), y: points.map(([step]) => step.advantage),
              text: points.map(([, t]) => `step ${t}`),
              hovertemplate: "%{text}: truth %{x:.3f}, credit %{y:.3f}<extra>%{fullData.name}</extra>"};
    });
    Plotly.newPlot(plot, data, {
      title: {text: `Group ${group.group_id}: step credit against the solver truth`},
      xaxis: {title: {text: "solver truth g_t (steps of regret)"}, zeroline: true},
      yaxis: {title: {text: "step credit (advantage)"}, zeroline: true},
      height: 340, margin: {t: 48, l: 64, r: 16, b: 52},
    }, {displaylogo: false, responsive: true});
  }

  function chooseGroup() {
    const group = currentGroup();
    showTruth(currentUpdate(), group);
    detail.replaceChildren(el("p", {class: "muted"}, "Click a step to open it."));
    list.replaceChildren(...group.rollouts.map((rollout) => {
      const head = el("div", {class: "rollout-head"},
        `rollout ${rollout.rollout} · ${rollout.won ? "won" : "not won"} · return ` +
        `${fmt(rollout.return)} · ${rollout.steps.length} steps` +
        (rollout.truncated ? " · truncated" : ""));
      const steps = rollout.steps.map((step, t) => el("li", {
        class: "step", background: step.colour, "data-rollout": String(rollout.rollout),
        "data-step": String(t), title: `advantage ${fmt(step.advantage)}`,
        click: (event) => openStep(rollout, t, event.currentTarget),
      }, el("span", {}, `t=${t}`), el("span", {class: "action"}, step.response),
         el("span", {class: "adv"}, fmt(step.advantage)),
         el("span", {class: "obs", title: "the observation before this action"},
            "saw: ", step.observation)));
      return el("div", {class: "rollout"}, head, el("ol", {class: "steps"}, ...steps));
    }));
  }

  function openStep(rollout, t, item) {
    for (const open of list.querySelectorAll(".step.open")) open.classList.remove("open");
    if (item) item.classList.add("open");
    const update = currentUpdate();
    const step = rollout.steps[t];
    const values = [["reward", step.reward]];
    if (update.token_level && step.tokens) {
      const trained = step.tokens.token_advantage.filter((v) => v !== null);
      values.push(["step_advantage", step.advantage],
        ["token_advantage", trained.length === 0 ? null : `mean ${fmt(
          trained.reduce((a, b) => a + b, 0) / trained.length)}, ${fmt(Math.min(...trained))}` +
          ` to ${fmt(Math.max(...trained))} over ${trained.length} tokens`]);
    } else {
      values.push(["advantage", step.advantage]);
    }
    if (update.truth) values.push(["truth", step.truth]);
    values.push(...update.step_fields.map((name) => [name, step.values[name]]));
    const defined = values.filter(([name]) => viewer.definitions[name]);
    const parts = [
      el("h3", {}, `Rollout ${rollout.rollout}, step ${t}`),
      table(["value", "number"], values, null, (i) => viewer.definitions[values[i][0]] || ""),
      el("dl", {class: "legend"}, ...defined.flatMap(([name]) => [
        el("dt", {}, name), el("dd", {}, viewer.definitions[name])])),
      el("h3", {}, "Observation before this action"),
      el("pre", {class: "observation"}, step.observation),
      el("h3", {}, "Response"), el("pre", {class: "response"}, step.response),
      el("p", {}, `parsed action: ${step.action === null ? "(unparsable)" : step.action} · ` +
                  (step.valid ? "valid" : "invalid")),
    ];
    const trace = rollout.trace;
    if (trace) {
      const edges = trace.edges.filter((e) => e.step === t);
      const touched = new Set(edges.map((e) => e.atom_id));
      parts.push(el("h3", {}, "Atoms (status before → after this step)"),
        table(["atom", "role", "evaluable", "before", "after", "edges at this step", "δ (end)"],
          trace.atoms.map((atom, j) => [
            atom.atom_id, atom.score_role, atom.evaluable_when, trace.statuses[t][j],
            trace.statuses[t + 1][j],
            edges.filter((e) => e.atom_id === atom.atom_id).map((e) => e.relation).join(", "),
            trace.delta[j]]),
          (j) => (touched.has(trace.atoms[j].atom_id) ? "touched" : "")));
      parts.push(el("h3", {}, "Proof edges of this step"), edges.length === 0
        ? el("p", {class: "muted"}, "No proof edge: VICT cannot credit this step.")
        : table(["relation", "atom", "weight", "valid", "unmet parents", "evidence"],
          edges.map((e) => [e.relation, e.atom_id, e.weight, e.valid ? "yes" : "no",
                            e.unmet_parents.join(", "), e.source])));
    }
    if (step.ledger.length > 0) {
      parts.push(el("h3", {}, "Witness: the ledger rows of this step"),
        table(["atom", "relation", "evidence", "δ̂", "ω", "ω / Z", "atom credit",
               "A^VICT", "correction", "base"],
          step.ledger.map((r) => [r.atom_id, r.relation, r.evidence_source, r.delta_hat,
                                  r.witness_weight, r.witness_share, r.atom_credit,
                                  r.vict_advantage, r.correction, r.base_advantage])),
        el("p", {class: "note"}, "δ̂: the atom's marginal value to the rollout's score; ω: " +
           "this step's witness weight for the atom, ω / Z its share of the atom's witnesses; " +
           "atom credit = δ̂ · ω / Z; A^VICT sums the step's atom credits; correction and " +
           "base as defined above."));
    } else if (trace) {
      parts.push(el("p", {class: "muted"}, "No ledger row: this step's correction is 0."));
    }
    if (step.tokens) {
      const tokens = step.tokens;
      const spans = tokens.text.map((text, i) => el("span", {
        class: "token", background: tokens.colours[i],
        title: update.token_fields.map((f) => `${f}: ${fmt(tokens[f][i])}`).join("\n"),
      }, text));
      parts.push(el("h3", {}, "Token heat-map"),
        el("p", {class: "scale-note"}, `colour: ${update.heat}; red below 0, blue above, ` +
                                       "scaled to this step's largest value"),
        el("div", {class: "tokens"}, ...spans),
        el("details", {}, el("summary", {}, "every token's values"),
          table(["token", ...update.token_fields],
                tokens.text.map((text, i) => [text, ...update.token_fields.map((f) => tokens[f][i])]))));
    }
    detail.replaceChildren(...parts);
  }

  fill(pickRun, viewer.runs.map((r) => `${r.name} (${r.updates.length} saved updates)`));
  pickRun.addEventListener("change", chooseRun);
  pickUpdate.addEventListener("change", chooseUpdate);
  pickGroup.addEventListener("change", chooseGroup);
  chooseRun();
  document.body.dataset.ready = "1";
})();
