// tenure's status page. Plain DOM: every name on the page comes from a
// client (group, member, client and host names), so text only ever goes in
// through textContent and attributes through setAttribute, never as HTML.
"use strict";

(() => {
  const GROUPS_EVERY_MS = 2000; // the group list and the node line
  const POLL_EVERY_MS = 1000;   // a group, when event streams fail
  const LOG_LIMIT = 50;

  const $ = (id) => document.getElementById(id);

  // el builds an element: attrs are set as attributes (class as className),
  // children are nodes or strings (as text).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else e.setAttribute(k, String(v));
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      e.append(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    }
    return e;
  }

  // A member's colour is a hash of its ID, so it stays the same across
  // updates, reloads and other members coming and going.
  function hash(s) {
    let h = 0x811c9dc5;
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
    return h >>> 0;
  }
  // Hues stay clear of red, which marks unowned partitions.
  function paint(e, member) {
    const hue = 35 + Math.round((hash(member) * 137.508) % 290);
    e.style.setProperty("--owner", `hsl(${hue} 70% 80%)`);
    e.style.setProperty("--owner-edge", `hsl(${hue} 55% 38%)`);
  }
  // tag is a member's short name in the grid: the end of its ID, which
  // is random for KIP-848 members (base64, whose padding is dropped here)
  // and a UUID for classic ones.
  function tag(member) {
    const m = member.replace(/=+$/, "");
    return m.length <= 6 ? member : "…" + m.slice(-4);
  }

  function ms(n) {
    if (n < 1000) return `${n} ms`;
    if (n < 60000) return `${(n / 1000).toFixed(1)} s`;
    return `${Math.floor(n / 60000)} min ${Math.round((n % 60000) / 1000)} s`;
  }
  function clock(iso) {
    const d = new Date(iso);
    if (isNaN(d)) return String(iso);
    const p = (n, w) => String(n).padStart(w, "0");
    return `${d.getFullYear()}-${p(d.getMonth() + 1, 2)}-${p(d.getDate(), 2)} ` +
      `${p(d.getHours(), 2)}:${p(d.getMinutes(), 2)}:${p(d.getSeconds(), 2)}.${p(d.getMilliseconds(), 3)}`;
  }

  async function getJSON(url) {
    const resp = await fetch(url, { cache: "no-store", headers: { Accept: "application/json" } });
    let body = null;
    try { body = await resp.json(); } catch (_) { /* not JSON */ }
    return { status: resp.status, ok: resp.ok, body };
  }
  const groupURL = (name) => "/api/groups/" + encodeURIComponent(name);

  // The node line: which node answers, and who leads.
  function renderNode(st) {
    const p = $("node");
    const self = `node ${st.node.id} at ${st.node.addr}`;
    if (st.shards) {
      // With shards no node leads: each coordinates its shards' groups.
      const n = st.shards.coordinating.length;
      p.textContent = n > 0
        ? `${self} · coordinating ${n} of ${st.shards.count} shards (${st.shards.coordinating.join(", ")}): their groups`
        : `${self} · coordinating none of the ${st.shards.count} shards now`;
      p.className = n > 0 ? "" : "follower";
    } else if (st.leading) {
      p.textContent = `${self} · leading: coordinating every group`;
      p.className = "";
    } else if (st.leader) {
      p.textContent = `${self} · this node follows; the leader is node ${st.leader.id} at ${st.leader.addr}`;
      p.className = "follower";
    } else {
      p.textContent = `${self} · no node leads now: an election is under way`;
      p.className = "follower";
    }
  }

  // ---- the group list ----

  function renderGroups(data) {
    renderNode(data);
    const body = $("groups-table").tBodies[0];
    const rows = data.groups.map((g) => el("tr", { class: g.unowned > 0 ? "has-unowned" : "", "data-group": g.name },
      el("td", { class: "name" }, el("a", { href: "#/groups/" + encodeURIComponent(g.name) }, g.name)),
      el("td", {}, g.type),
      el("td", {}, g.state),
      el("td", { class: "num" }, g.epoch),
      el("td", { class: "num" }, g.members),
      el("td", { class: "num" }, g.owned),
      el("td", { class: "num unowned" }, g.unowned)));
    body.replaceChildren(...rows);
    const note = $("groups-note");
    note.hidden = data.groups.length > 0;
    note.textContent = data.shards
      ? (data.shards.coordinating.length > 0 ? "No groups in this node's shards yet: each node lists the groups of its shards."
        : "This node coordinates no shard: each node lists the groups of its shards.")
      : data.leading ? "No groups yet." : "This node does not lead: the leader lists the groups.";
  }

  // refreshGroups reads the group list; the node line always shows it,
  // the table only on the list's page.
  async function refreshGroups() {
    try {
      const r = await getJSON("/api/groups");
      if (!r.ok) return;
      if ($("groups-view").hidden) renderNode(r.body);
      else {
        renderGroups(r.body);
        refreshKeys();
      }
    } catch (_) {
      $("node").textContent = "cannot reach the server";
      $("node").className = "follower";
    }
  }

  // ---- the signing keys ----

  // refreshKeys shows the grant-signing keys under the group list, or
  // nothing when the node does not sign grants.
  async function refreshKeys() {
    try {
      const r = await getJSON("/api/keys");
      const view = $("keys-view");
      view.hidden = !r.ok;
      if (!r.ok) return;
      const when = (t) => t ? clock(t) : "";
      const rows = r.body.keys.map((k) => el("tr", { class: "key-" + k.state, "data-key": k.id },
        el("td", { class: "key-id" }, k.id),
        el("td", {}, k.state),
        el("td", {}, when(k.created)),
        el("td", {}, when(k.retired)),
        el("td", {}, when(k.revoked)),
        el("td", { class: "key-public" }, k.public_key)));
      $("keys-table").tBodies[0].replaceChildren(...rows);
    } catch (_) { /* the node line says the server is unreachable */ }
  }

  // ---- one group ----

  // watch follows one group until stop is called: server-sent events,
  // falling back to polling when the browser or the server cannot stream.
  function watch(name, onGroup, onProblem) {
    let stopped = false, es = null, timer = null;
    const poll = async () => {
      if (stopped) return;
      setLive("polling every second");
      try {
        const r = await getJSON(groupURL(name));
        if (stopped) return;
        if (r.ok) onGroup(r.body); else onProblem(r.body ? r.body.error : `HTTP ${r.status}`);
      } catch (_) {
        if (!stopped) onProblem("cannot reach the server");
      }
      if (!stopped) timer = setTimeout(poll, POLL_EVERY_MS);
    };
    if (typeof EventSource === "function") {
      es = new EventSource(groupURL(name) + "/events");
      es.addEventListener("open", () => setLive("live (server-sent events)"));
      es.addEventListener("group", (ev) => onGroup(JSON.parse(ev.data)));
      es.addEventListener("problem", (ev) => onProblem(JSON.parse(ev.data).error));
      es.addEventListener("error", () => {
        // CONNECTING: the browser retries by itself. CLOSED: the server
        // refused the stream (no such group, too many streams): poll,
        // which also says why.
        if (es.readyState === EventSource.CLOSED && !stopped) {
          es = null;
          poll();
        }
      });
    } else {
      poll();
    }
    return () => {
      stopped = true;
      if (es) es.close();
      clearTimeout(timer);
    };
  }

  function setLive(how) {
    $("live").textContent = how;
    document.body.dataset.live = how.startsWith("live") ? "sse" : "polling";
  }

  function fact(term, value, cls) {
    return el("div", {}, el("dt", {}, term), el("dd", { class: cls }, value));
  }

  function renderGroup(g) {
    $("group-problem").hidden = true;
    $("group-name").textContent = g.name;
    document.title = `${g.name} · tenure`;
    const facts = [
      fact("type", g.type),
      fact("state", g.state),
      fact(g.type === "consumer" ? "group epoch" : "generation", String(g.epoch)),
    ];
    if (g.type === "consumer") facts.push(fact("assignor", g.protocol || "–"));
    else {
      facts.push(fact("protocol", g.protocol ? `${g.protocol_type} / ${g.protocol}` : g.protocol_type || "–"));
      if (g.leader) facts.push(fact("leader", tag(g.leader)));
    }
    facts.push(fact("members", String(g.members.length)));
    facts.push(fact("owned", String(g.owned)));
    facts.push(fact("unowned", String(g.unowned), g.unowned > 0 ? "bad" : ""));
    $("group-facts").replaceChildren(...facts);
    renderGrids(g);
    renderMembers(g);
  }

  function renderGrids(g) {
    const sections = g.topics.map((t) => {
      const unowned = t.partitions.filter((p) => !p.owner).length;
      const title = `${t.name} · ${t.partitions.length} partitions` + (unowned ? ` · ${unowned} unowned` : "");
      const cells = t.partitions.map((p) => cell(t.name, p));
      return el("section", { class: "topic", "data-topic": t.name },
        el("h3", {}, title),
        el("ol", { class: "grid", "aria-label": `partitions of ${t.name}` }, ...cells));
    });
    if (sections.length === 0) {
      sections.push(el("p", { class: "note" }, g.type === "classic" && g.protocol_type !== "consumer" && g.members.length
        ? "This group's assignments are not Kafka consumer assignments: the coordinator cannot read them."
        : "No partitions: the group subscribes to no existing topic."));
    }
    $("grids").replaceChildren(...sections);
  }

  function cell(topic, p) {
    let who, label;
    const attrs = { class: "cell", "data-topic": topic, "data-partition": p.partition, "data-owner": p.owner, "data-token": p.token };
    if (!p.owner) {
      attrs.class += " unowned";
      who = p.target ? `unowned → ${tag(p.target)}` : "unowned";
      label = `partition ${p.partition}: unowned` + (p.target ? `, going to ${p.target}` : "");
    } else {
      who = tag(p.owner);
      label = `partition ${p.partition}: owned by ${p.owner} under token ${p.token}`;
      const moving = p.target && p.target !== p.owner;
      if (p.revoking) {
        attrs.class += " revoking";
        who += moving ? ` → ${tag(p.target)}` : " (revoking)";
        label += moving ? `, being revoked for ${p.target}` : ", being revoked";
      } else if (moving) {
        // The target gives it to another member; its owner has not been
        // told to let go yet.
        who += ` → ${tag(p.target)}`;
        label += `, to go to ${p.target}`;
      }
    }
    attrs["aria-label"] = label;
    attrs.title = label;
    const li = el("li", attrs,
      el("span", { class: "p" }, p.partition),
      el("span", { class: "tok" }, p.owner ? `@${p.token}` : "–"),
      el("span", { class: "who" }, who));
    if (p.owner) paint(li, p.owner);
    return li;
  }

  function renderMembers(g) {
    const rows = g.members.map((m) => {
      const swatch = el("span", { class: "swatch", "aria-hidden": "true" });
      paint(swatch, m.id);
      const late = m.session_timeout_ms > 0 && m.heartbeat_age_ms > m.session_timeout_ms / 2;
      let parts = String(m.partitions);
      if (m.revoking) parts += ` (${m.revoking} revoking)`;
      if (m.pending) parts += ` (+${m.pending} pending)`;
      return el("tr", { "data-member": m.id },
        el("td", { class: "member" }, swatch, el("span", { class: "mono" }, tag(m.id)),
          m.instance_id ? ` instance ${m.instance_id}` : "",
          tag(m.id) !== m.id ? el("span", { class: "id mono" }, m.id) : null),
        el("td", { class: "client" }, m.client_id),
        el("td", {}, m.client_host + (m.rack ? ` (rack ${m.rack})` : "")),
        el("td", { class: "num" }, m.epoch),
        el("td", {}, m.state),
        el("td", { class: "num" + (late ? " late" : ""), title: `session ${ms(m.session_timeout_ms)}` }, `${ms(m.heartbeat_age_ms)} ago`),
        el("td", { class: "num" }, parts));
    });
    $("members-table").tBodies[0].replaceChildren(...rows);
  }

  // ---- the generation log ----

  let logSeq = 0; // the answer of an older read that arrives late is dropped

  async function refreshLog(name, isCurrent) {
    const seq = ++logSeq;
    let r;
    try {
      r = await getJSON(`${groupURL(name)}/log?limit=${LOG_LIMIT}`);
    } catch (_) {
      return;
    }
    if (!isCurrent() || seq !== logSeq) return;
    const status = $("timeline-status");
    if (r.status === 501) {
      status.textContent = "generation log not available";
      $("timeline").replaceChildren();
      return;
    }
    if (!r.ok) {
      status.textContent = r.body ? r.body.error : `HTTP ${r.status}`;
      return;
    }
    status.textContent = r.body.length ? "" : "no generation yet";
    $("timeline").replaceChildren(...r.body.map(entry));
  }

  function entry(e) {
    const moves = e.moves || [];
    const li = el("li", { class: "entry", "data-epoch": e.epoch },
      el("div", { class: "head" },
        el("span", { class: "epoch" }, `epoch ${e.epoch}`),
        el("span", { class: "reason" }, e.reason || "group emptied"),
        el("span", { class: "when" }, clock(e.time))));
    const members = el("p", { class: "line" }, `${e.members_before} → ${e.members} members`);
    for (const m of e.joined || []) members.append(" ", el("span", { class: "added", title: m }, `+${tag(m)}`));
    for (const m of e.left || []) members.append(" ", el("span", { class: "removed", title: m }, `−${tag(m)}`));
    li.append(members);
    if (e.after_failover) {
      li.append(el("p", { class: "line" }, `soon after the group was restored from the store (${clock(e.after_failover)})`));
    }
    if (!e.assigned) {
      li.append(el("p", { class: "line" }, "moves not known yet: the leader has not sent its assignment"));
      return li;
    }
    const least = e.moves_min >= 0 ? `fewest possible ${e.moves_min}` : "fewest possible n/a";
    li.append(el("p", { class: "line" }, `${moves.length} ${moves.length === 1 ? "move" : "moves"} (${least})`));
    const h = e.handoff;
    if (moves.length && h) {
      li.append(el("p", { class: "line" }, (h.done ? "hand-off done" : `hand-off in progress (${h.granted} granted)`) +
        `: ${h.unowned_partition_seconds.toFixed(2)} partition-seconds unowned, longest ${h.max_unowned_seconds.toFixed(2)} s`));
    }
    if (moves.length) {
      li.append(el("details", {}, el("summary", {}, "moves"),
        el("ul", {}, ...moves.map((m) => el("li", { class: "mono" },
          `${m.topic}[${m.partition}]: ${m.from ? `${tag(m.from)}@${m.old_token}` : "unowned"} → ${m.to ? `${tag(m.to)}@${m.new_token}` : "unowned"}`)))));
    }
    return li;
  }

  // ---- routing: #/ lists the groups, #/groups/NAME shows one ----

  let stopGroup = null, route = 0;

  function show() {
    route++;
    if (stopGroup) { stopGroup(); stopGroup = null; }
    const m = location.hash.match(/^#\/groups\/(.*)$/);
    $("groups-view").hidden = !!m;
    $("group-view").hidden = !m;
    refreshGroups();
    if (!m) {
      document.title = "tenure status";
      setLive("");
      return;
    }
    let name;
    try { name = decodeURIComponent(m[1]); } catch (_) { name = m[1]; }
    const mine = route, isCurrent = () => route === mine;
    $("group-name").textContent = name;
    $("group-facts").replaceChildren();
    $("grids").replaceChildren();
    $("members-table").tBodies[0].replaceChildren();
    $("timeline").replaceChildren();
    $("timeline-status").textContent = "";
    // The log changes with the epoch, and its last entry while the
    // group reconciles (moves, hand-off): read it again when either may
    // have changed.
    let logKey = null;
    stopGroup = watch(name, (g) => {
      if (!isCurrent()) return;
      renderGroup(g);
      const key = `${g.epoch} ${g.state} ${g.owned} ${g.unowned}`;
      if (key !== logKey) {
        logKey = key;
        refreshLog(name, isCurrent);
      }
    }, (msg) => {
      if (!isCurrent()) return;
      const p = $("group-problem");
      p.textContent = msg;
      p.hidden = false;
    });
  }

  window.addEventListener("hashchange", show);
  show();
  setInterval(refreshGroups, GROUPS_EVERY_MS);
})();
