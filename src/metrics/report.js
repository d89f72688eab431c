// Draws the charts of a diloco report from the runs' metrics rows (the JSON
// in #runs) with Chart.js, inlined in the same page. Each chart's box is
// marked with the series it drew (data-series) so a test can check them.
"use strict";
(function () {
  const runs = JSON.parse(document.getElementById("runs").textContent);
  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                   "#7f7f7f", "#bcbd22"];
  const color = (i) => palette[i % palette.length];
  const charts = [];

  // Cumulative inner steps of rank 0's site at the end of each round.
  function steps(rows) {
    let total = 0;
    return rows.map((r) => (total += r.H || 0));
  }
  function points(rows, xs, key) {
    const out = [];
    rows.forEach((r, i) => {
      const y = typeof key === "function" ? key(r, i) : r[key];
      if (y !== null && y !== undefined && Number.isFinite(y) && Number.isFinite(xs[i])) out.push({ x: xs[i], y: y });
    });
    return out;
  }
  // The y range without each series' first tenth (at least its first point):
  // a first-round spike would otherwise squash every curve to the bottom.
  function steadyRange(datasets) {
    let lo = Infinity, hi = -Infinity;
    for (const d of datasets) {
      const skip = Math.max(1, Math.ceil(d.data.length / 10));
      const kept = d.data.length > skip ? d.data.slice(skip) : d.data;
      for (const p of kept) { lo = Math.min(lo, p.y); hi = Math.max(hi, p.y); }
    }
    if (!Number.isFinite(lo)) return {};
    const pad = Math.max((hi - lo) * 0.08, Math.abs(hi) * 0.01, 1e-9);
    return { min: lo - pad, max: hi + pad };
  }
  function box(section, id, title, note) {
    const div = document.createElement("div");
    div.className = "chart";
    div.dataset.chart = id;
    const h = document.createElement("h3");
    h.textContent = title;
    div.appendChild(h);
    if (note) {
      const p = document.createElement("p");
      p.className = "note";
      p.textContent = note;
      div.appendChild(p);
    }
    document.getElementById(section).appendChild(div);
    return div;
  }
  function draw(section, id, title, datasets, axes, opts) {
    opts = opts || {};
    datasets = datasets.filter((d) => d.data.length > 0);
    const div = box(section, id, title, opts.note);
    if (datasets.length === 0) {
      div.dataset.series = "";
      div.classList.add("empty");
      div.appendChild(document.createTextNode(opts.empty || "nothing measured in these runs"));
      return;
    }
    const holder = document.createElement("div");
    holder.className = "canvas";
    const canvas = document.createElement("canvas");
    holder.appendChild(canvas);
    div.appendChild(holder);
    const y = Object.assign({ type: axes.ylog ? "logarithmic" : "linear", title: { display: true, text: axes.y } },
                            opts.steady ? steadyRange(datasets) : {}, opts.yrange || {});
    const x = { type: axes.xlog ? "logarithmic" : "linear", title: { display: true, text: axes.x } };
    if (opts.steady) {
      // Chart.js would take the x range from the points inside the y range only.
      const xs = datasets.flatMap((d) => d.data.map((p) => p.x));
      x.min = axes.xlog ? Math.min(...xs) : Math.min(0, ...xs);
      x.max = Math.max(...xs);
    }
    if (axes.xlog) x.ticks = { autoSkip: false, maxRotation: 0, callback: decades(axes.xunit) };
    if (axes.ylog) y.ticks = { autoSkip: false, callback: decades(axes.yunit) };
    const chart = new Chart(canvas, {
      type: "line",
      data: { datasets: datasets },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: false, normalized: true,
        interaction: { mode: "nearest", intersect: false },
        scales: { x: x, y: y },
        plugins: {
          legend: { position: "right", align: "start", labels: { boxWidth: 18, usePointStyle: false } },
          tooltip: opts.tooltip ? { callbacks: { label: opts.tooltip } } : {},
        },
      },
    });
    if (opts.steady) {
      const full = document.createElement("button");
      full.textContent = "whole y range";
      full.onclick = () => {
        const whole = full.textContent === "whole y range";
        const r = whole ? {} : steadyRange(datasets);
        chart.options.scales.y.min = r.min;
        chart.options.scales.y.max = r.max;
        chart.update();
        full.textContent = whole ? "steady y range" : "whole y range";
      };
      div.insertBefore(full, holder);
    }
    div.dataset.series = datasets.map((d) => d.label).join("|");
    charts.push(chart);
  }
  // Log axes: a label at each power of ten only (Chart.js would crowd 1-9 x
  // 10^k), or at every tick of a range that holds fewer than two.
  function decades(unit) {
    const bytes = ["B", "KB", "MB", "GB", "TB", "PB"];
    const decade = (v) => Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9;
    const text = (v) => {
      if (unit !== "bytes") return String(Number(v.toPrecision(3)));
      const k = Math.min(bytes.length - 1, Math.max(0, Math.floor(Math.log10(v) / 3 + 1e-9)));
      return Number((v / Math.pow(1000, k)).toPrecision(3)) + " " + bytes[k];
    };
    return (v, i, ticks) => (decade(v) || ticks.filter((t) => decade(t.value)).length < 2 ? text(v) : "");
  }
  function line(label, data, i, extra) {
    return Object.assign({ label: label, data: data, borderColor: color(i), backgroundColor: color(i),
                           borderWidth: 1.5, pointRadius: 0, tension: 0 }, extra || {});
  }
  // Train and eval of each run in its colour: eval solid with points, train dashed and thin.
  function lossSets(xsOf, filter) {
    const sets = [];
    runs.forEach((run, i) => {
      const xs = xsOf(run.rows);
      const keep = (ps) => (filter ? ps.filter(filter) : ps);
      sets.push(line(run.name + " eval", keep(points(run.rows, xs, "eval_loss")), i,
                     { borderWidth: 2, pointRadius: 2.5 }));
      sets.push(line(run.name + " train", keep(points(run.rows, xs, "train_loss")), i,
                     { borderWidth: 1, borderDash: [5, 4] }));
    });
    return sets;
  }

  function lossCharts() {
    const steady = { steady: true };
    draw("loss", "loss_steps", "Loss against inner steps", lossSets(steps), { x: "inner steps (per site)", y: "loss" }, steady);
    draw("loss", "loss_wall", "Loss against wall time", lossSets((rows) => rows.map((r) => r.wall_s)),
         { x: "wall time (s)", y: "loss" }, steady);
    draw("loss", "loss_bytes", "Loss against bytes sent between sites (log axis)",
         lossSets((rows) => rows.map((r) => r.bytes_sent), (p) => p.x > 0),
         { x: "bytes sent between sites", y: "loss", xlog: true, xunit: "bytes" },
         { steady: true, empty: "no bytes crossed between sites (one site)" });
  }

  function roundsOf(rows) { return rows.map((r) => r.round); }
  // Per site: its inner steps times its mean step time over the round's wall time.
  function siteSets(fn, extra) {
    const sets = [];
    runs.forEach((run, i) => {
      const sites = Math.max(0, ...run.rows.map((r) => (r.site_steps || []).length));
      const dash = [[], [6, 3], [2, 2], [8, 3, 2, 3]];
      for (let s = 0; s < sites; ++s)
        sets.push(line(run.name + " site " + s, points(run.rows, roundsOf(run.rows), (r, k) => fn(run.rows, r, k, s)), i,
                       Object.assign({ borderDash: dash[s % dash.length] }, extra || {})));
    });
    return sets;
  }
  function utilization(rows, r, k, s) {
    const wall = r.wall_s - (k > 0 ? rows[k - 1].wall_s : 0);
    if (!r.site_steps || s >= r.site_steps.length || !(wall > 0) || !r.site_step_s) return null;
    return Math.min(1, (r.site_steps[s] * r.site_step_s[s]) / wall);
  }
  function siteCharts() {
    draw("sites", "utilization", "Compute utilization per site (inner steps x mean step time / round wall time)",
         siteSets(utilization), { x: "round", y: "share of the round" }, { yrange: { min: 0, max: 1.05 } });
    draw("sites", "H", "Inner steps per round (H) per site",
         siteSets((rows, r, k, s) => (r.site_steps && s < r.site_steps.length ? r.site_steps[s] : null), { stepped: "middle" }),
         { x: "round", y: "inner steps" }, { yrange: { min: 0, ticks: { precision: 0 } } });
    const speed = runs.map((run, i) => line(run.name, points(run.rows, roundsOf(run.rows), "tokens_per_s"), i));
    draw("sites", "tokens_per_s", "Tokens per second (all sites)", speed, { x: "round", y: "tokens/s" },
         { empty: "no tokens/s in these metrics (written by diloco since the live line has it)" });
    const mfu = runs.map((run, i) => line(run.name, points(run.rows, roundsOf(run.rows), (r) => (r.mfu == null ? null : 100 * r.mfu)), i));
    draw("sites", "mfu", "Model FLOPs utilization (rank 0's site)", mfu, { x: "round", y: "MFU (%)" },
         { empty: "no MFU: the device's peak is not known for these runs (metrics.peak_tflops)" });
  }

  function linkCharts() {
    for (const [key, probedKey, id, title, unit] of [
        ["link_bandwidth_mbps", "bandwidth_mbps", "link_bandwidth", "Link bandwidth between sites", "Mbit/s"],
        ["link_latency_ms", "latency_ms", "link_latency", "Link latency between sites", "ms"]]) {
      const sets = [];
      runs.forEach((run, i) => {
        sets.push(line(run.name + " passive estimate", points(run.rows, roundsOf(run.rows), key), i));
        const pairs = {};
        for (const r of run.rows)
          for (const p of r.probed || []) (pairs[p.a + "-" + p.b] = pairs[p.a + "-" + p.b] || []).push({ x: r.round, y: p[probedKey] });
        for (const [pair, data] of Object.entries(pairs))
          sets.push(line(run.name + " probed " + pair, data.filter((p) => Number.isFinite(p.y)), i,
                         { showLine: false, pointRadius: 4, pointStyle: "triangle" }));
      });
      draw("links", id, title + " (" + unit + ")", sets, { x: "round", y: unit, ylog: key === "link_bandwidth_mbps" },
           { empty: "no link measurements in these runs (one site, or no round measured one)" });
    }
  }

  // Joins, losses, refusals and left-out sites at their round, at the height
  // of the membership after the change; the members count as a step line.
  function membershipEvents(run) {
    const ev = [];
    for (const r of run.rows) {
      for (const c of r.membership || []) {
        if (c.joined.length) ev.push({ round: r.round, kind: "joined", sites: c.joined.join(", "), why: "", epoch: c.epoch, members: r.members });
        if (c.left.length) ev.push({ round: r.round, kind: "lost", sites: c.left.join(", "), why: c.why, epoch: c.epoch, members: r.members });
        if (c.refused.length) ev.push({ round: r.round, kind: "refused", sites: c.refused.join("; "), why: "", epoch: c.epoch, members: r.members });
      }
      for (const e of r.excluded || [])
        ev.push({ round: r.round, kind: "left out", sites: "site " + e.site, why: e.reason, epoch: r.epoch, members: r.members });
    }
    return ev;
  }
  function membershipChart() {
    const styles = { joined: ["triangle", "#2ca02c"], lost: ["crossRot", "#d62728"], refused: ["rect", "#ff7f0e"],
                     "left out": ["circle", "#7f7f7f"] };
    const sets = [];
    const table = [];
    runs.forEach((run, i) => {
      // A change belongs to the round that made it: the count steps at that round.
      sets.push(line(run.name + " members", points(run.rows, roundsOf(run.rows), "members"), i, { stepped: "before" }));
      const ev = membershipEvents(run);
      for (const [kind, [shape, c]] of Object.entries(styles)) {
        const data = ev.filter((e) => e.kind === kind).map((e) => ({ x: e.round, y: e.members == null ? 0 : e.members, e: e }));
        sets.push(line(run.name + " " + kind, data, i, { showLine: false, pointRadius: 7, pointStyle: shape, clip: 10,
                                                         borderColor: c, backgroundColor: c, borderWidth: 2 }));
      }
      for (const e of ev) table.push([run.name, e.round, e.epoch == null ? "" : e.epoch, e.kind, e.sites, e.why]);
    });
    draw("membership", "membership", "Membership: sites in the group, joins, losses, refusals, left-out sites", sets,
         { x: "round", y: "sites in the group" },
         { empty: "no membership changes or left-out sites in these runs", yrange: { min: 0, ticks: { precision: 0 } },
           tooltip: (ctx) => (ctx.raw.e ? ctx.raw.e.kind + ": " + ctx.raw.e.sites + (ctx.raw.e.why ? " (" + ctx.raw.e.why + ")" : "")
                                       : ctx.dataset.label + ": " + ctx.raw.y) });
    if (table.length) {
      const t = document.createElement("table");
      t.innerHTML = "<tr><th>run</th><th>round</th><th>epoch</th><th>change</th><th>sites</th><th>why</th></tr>";
      for (const row of table) {
        const tr = t.insertRow();
        for (const cell of row) tr.insertCell().textContent = String(cell);
      }
      document.getElementById("membership").appendChild(t);
    }
  }

  lossCharts();
  siteCharts();
  linkCharts();
  membershipChart();
  document.body.dataset.charts = String(charts.length);
  document.body.dataset.ready = "1";
})();
