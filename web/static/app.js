// fleetdeck dashboard: progressive enhancement over server-rendered pages (everything works without it).
// Live updates: the server pushes changed repo ids over SSE (/api/events), and every few seconds a status
// with the presence stamp; we re-fetch the page's HTML fragment and patch it in place, keeping the filter
// form (and whatever the person typed) untouched. Rows that carry a `data-key` and were not there before a
// patch (new digest events) are marked as new.
(function () {
  "use strict";
  document.documentElement.classList.add("js");
  const main = document.getElementById("main");
  const live = main ? main.dataset.live : null;
  const region = document.querySelector("[data-fragment]");
  const statusEl = document.getElementById("live-status");
  const form = document.getElementById("filters");
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  const urls = document.body.dataset;  // the server's own routes (url_for), never spelled out here
  // The tab's decision key: handed over once by the landing exchange and kept in this origin's storage, which
  // no other port's page can read; every decision sends it as a header. No page's HTML ever carries it.
  const decisionKey = "fleetdeck.decision";

  // ---- landing: trade the link's single-use code for a session (the cookie) and the decision key --------
  const landing = document.getElementById("landing");
  if (landing) {
    const said = document.getElementById("landing-status");
    fetch(landing.action, { method: "POST", credentials: "same-origin",
                            headers: { "Content-Type": "application/json", Accept: "application/json" },
                            body: JSON.stringify({ code: landing.elements.code.value, next: landing.elements.next.value }) })
      .then(function (r) { return r.json().then(function (j) { return [r.ok, j]; }); })
      .then(function (answer) {
        if (!answer[0]) throw new Error(answer[1].error ? answer[1].error.message : "refused");
        localStorage.setItem(decisionKey, answer[1].decision_key);
        window.location.replace(answer[1].next);
      })
      .catch(function (err) { said.textContent = err.message; landing.hidden = true; });
  }

  // ---- relative times ---------------------------------------------------------------------------------
  function ago(iso) {
    const t = Date.parse(iso);
    if (!iso || isNaN(t)) return "—";
    const s = Math.max(0, Math.floor((Date.now() - t) / 1000));
    if (s >= 86400) return Math.floor(s / 86400) + " d ago";
    if (s >= 3600) return Math.floor(s / 3600) + " h ago";
    if (s >= 60) return Math.floor(s / 60) + " min ago";
    return s < 5 ? "just now" : s + " s ago";
  }
  function refreshTimes(root) {
    (root || document).querySelectorAll("time.ago[datetime]").forEach(function (el) {
      el.textContent = ago(el.getAttribute("datetime"));
    });
  }
  setInterval(refreshTimes, 10000);

  // ---- status pill --------------------------------------------------------------------------------------
  function setStatus(state, text) {
    if (!statusEl) return;
    statusEl.classList.remove("on", "off");
    if (state) statusEl.classList.add(state);
    statusEl.querySelector(".live-text").textContent = text;
  }
  function flash() {
    if (!statusEl) return;
    statusEl.classList.remove("flash");
    void statusEl.offsetWidth;
    statusEl.classList.add("flash");
  }

  // ---- fragment patching ---------------------------------------------------------------------------------
  let inFlight = false;
  let again = false;
  // Rows that appeared in the last few seconds keep their highlight when another update re-renders the region.
  const FRESH_MS = 3000;
  const fresh = new Map();
  const filtered = live === "queue" || live === "digest";  // pages whose fragment follows the URL's filters
  function fragmentUrl() {
    const base = region.dataset.fragment;
    return filtered ? base + window.location.search : base;
  }
  function keys(root) {
    const found = new Set();
    root.querySelectorAll("[data-key]").forEach(function (el) { found.add(el.dataset.key); });
    return found;
  }
  function patch(changedIds) {
    if (!region) return;
    if (inFlight) { again = true; return; }
    inFlight = true;
    fetch(fragmentUrl(), { headers: { Accept: "text/html" }, credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        // Where the focus is as the update lands (j/k may have moved it while the fragment was on its way):
        // a queue row's link, or an inbox item's link (its item, by its key), keeps it across the update.
        const active = document.activeElement;
        const focusedId = active && active.closest ? (active.closest("[data-repo-id]") || {}).dataset : null;
        const focusedItem = active && active.matches && active.matches("[data-key] .repo-link")
          ? active.closest("[data-key]").dataset.key : null;
        const before = keys(region);
        region.innerHTML = html;
        const now = Date.now();
        fresh.forEach(function (at, key) { if (now - at > FRESH_MS) fresh.delete(key); });
        region.querySelectorAll("[data-key]").forEach(function (el) {
          const key = el.dataset.key;
          if (before.size && !before.has(key)) fresh.set(key, now);
          if (fresh.has(key)) el.classList.add("updated");
        });
        refreshTimes(region);
        (changedIds || []).forEach(function (id) {
          const row = region.querySelector('tr[data-repo-id="' + id + '"]');
          if (row) row.classList.add("updated");
        });
        if (focusedId && focusedId.repoId) {
          const link = region.querySelector('tr[data-repo-id="' + focusedId.repoId + '"] a');
          if (link) link.focus();
        } else if (focusedItem) {
          const item = region.querySelector('[data-key="' + CSS.escape(focusedItem) + '"] .repo-link');
          if (item) item.focus();
        }
        region.dispatchEvent(new CustomEvent("fleetdeck:patched", { bubbles: true }));
      })
      .catch(function () { setStatus("off", "update failed; retrying"); })
      .finally(function () {
        inFlight = false;
        if (again) { again = false; patch(); }
      });
  }

  // ---- the watcher's start-up re-check: the banner (a role=status region) follows it --------------------------
  // Re-fetched as the stream says it moved, at most every REVERIFY_EVERY_MS while it runs (a screen reader
  // is not flooded), at once when it finishes; replaced only when its text changed.
  const banner = document.getElementById("reverify");
  const REVERIFY_EVERY_MS = 2000;
  let reverifyAt = 0;
  let reverifyTimer = null;
  function loadReverify() {
    reverifyTimer = null;
    reverifyAt = Date.now();
    fetch(banner.dataset.src, { headers: { Accept: "text/html" }, credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        if (html.trim() === banner.innerHTML.trim()) return;
        banner.innerHTML = html.trim();
        refreshTimes(banner);
        banner.dispatchEvent(new CustomEvent("fleetdeck:reverify", { bubbles: true }));
      })
      .catch(function () {});
  }
  let reverifySeen;
  function reverifyMoved(progress) {
    const stamp = JSON.stringify(progress);
    if (!banner || stamp === reverifySeen) return;
    reverifySeen = stamp;
    if (reverifyTimer && !(progress && progress.running)) clearTimeout(reverifyTimer);
    else if (reverifyTimer) return;
    const wait = progress && progress.running ? Math.max(0, reverifyAt + REVERIFY_EVERY_MS - Date.now()) : 0;
    reverifyTimer = setTimeout(loadReverify, wait);
  }

  // ---- server-sent events ----------------------------------------------------------------------------------
  let pollTimer = null;
  let presenceSeen = null;
  let historySeen = null;
  function startPolling() {
    if (pollTimer || !region) return;
    pollTimer = setInterval(function () { patch(); }, 5000);
  }
  function connect() {
    // Every page holds the stream: the "Needs you" strip is live everywhere, and the server counts the open
    // streams as the open tabs (desktop notifications are for when there are none). A page without `live`
    // follows only the strip.
    if (!window.EventSource || !urls.events) { setStatus(null, "static page"); return; }
    const source = new EventSource(urls.events);
    if (!live) {
      setStatus(null, "static page");
      source.addEventListener("inbox", function (ev) { needsYou(JSON.parse(ev.data)); });
      return;
    }
    source.addEventListener("open", function () {
      setStatus("on", "live");
      if (pollTimer) { clearInterval(pollTimer); pollTimer = null; patch(); }
    });
    source.addEventListener("change", function (ev) {
      const data = JSON.parse(ev.data);
      flash();
      if (live === "queue" || live === "agents" || live === "digest") patch(data.ids);
      else if (live === "repo" && data.ids.indexOf(Number(main.dataset.repoId)) !== -1) patch(data.ids);
    });
    // The hub's stream: a push landed, so a mirrored proposal or a decision's outcome may have moved.
    // Never while the person is deciding: a reason typed or a box ticked would be wiped.
    source.addEventListener("pushed", function () {
      const deciding = Array.prototype.some.call(document.querySelectorAll('form[data-enhance="decide"]'), function (f) {
        return f.contains(document.activeElement) ||
          Array.prototype.some.call(f.elements, function (el) { return el.type === "checkbox" ? el.checked : el.type === "text" && el.value; });
      });
      if ((live === "proposals" || live === "proposal") && !deciding) patch();
    });
    source.addEventListener("proposals", function (ev) {
      const data = JSON.parse(ev.data);
      flash();
      const badge = document.getElementById("pending-count");
      if (badge) { badge.textContent = data.pending; badge.hidden = !data.pending; }
      if (live === "proposals" || live === "proposal" || live === "queue") patch();
    });
    source.addEventListener("inbox", function (ev) {
      needsYou(JSON.parse(ev.data));
      const typing = document.activeElement && document.activeElement.matches("#inbox-live input");
      if (live === "inbox" && !typing) patch();   // never wipe a reason being typed
    });
    source.addEventListener("status", function (ev) {
      const data = JSON.parse(ev.data);
      const w = data.watcher || {};
      setStatus("on", w.state === "running" ? "live" : w.state === "absent" ? "live · no watcher" : "live · watcher " + w.state);
      document.querySelectorAll(".freshness time.ago").forEach(function (el) {
        if (filtered && data.indexed_at) el.setAttribute("datetime", data.indexed_at);
      });
      refreshTimes();
      const stamp = JSON.stringify(data.presence || null);
      if (presenceSeen !== null && stamp !== presenceSeen) patch();  // agents came, went or changed state
      presenceSeen = stamp;
      const history = JSON.stringify(data.history || null);
      if (historySeen !== null && history !== historySeen && (live === "digest" || live === "repo")) patch();
      historySeen = history;  // a never-seen fleet's history is being read: the events behind the page grew
      reverifyMoved(w.reverify || null);
    });
    source.addEventListener("error", function () {
      setStatus("off", "reconnecting… (polling every 5 s)");
      startPolling();
    });
  }
  // ---- "Needs you": the strip's counts, the title badge "(3) fleetdeck" and the tab's notifications ----------
  // Notifications are off until the person clicks a "Notify me" button (permission is asked then, never on
  // load); each new inbox item (by its key: one per item and state) notifies once; the first event only
  // learns what is already there.
  const notifyKey = "fleetdeck.notify";
  const baseTitle = document.title.replace(/^\(\d+\) /, "");
  let inboxSeen = null;
  function notifyOn() {
    return window.Notification && Notification.permission === "granted" && localStorage.getItem(notifyKey) === "on";
  }
  function needsYou(data) {
    Object.keys(data.counts).forEach(function (kind) {
      document.querySelectorAll('[data-count="' + kind + '"]').forEach(function (el) { el.textContent = data.counts[kind]; });
    });
    const strip = document.getElementById("needs-you");
    if (strip) { strip.dataset.total = data.total; strip.classList.toggle("has-items", data.total > 0); }
    document.title = (data.total ? "(" + data.total + ") " : "") + baseTitle;
    const keys = new Set(data.items.map(function (i) { return i.key; }));
    if (inboxSeen !== null && notifyOn()) {
      data.items.forEach(function (item) {
        if (inboxSeen.has(item.key)) return;
        const shown = new Notification("fleetdeck: " + item.kind, { body: item.summary, tag: item.key });
        shown.addEventListener("click", function () { window.focus(); window.location.href = item.url; });
      });
    }
    inboxSeen = keys;
  }
  document.querySelectorAll("#notify-toggle, #inbox-notify").forEach(function (toggle) {
    if (!window.Notification) return;
    const show = function () {
      const on = notifyOn();
      toggle.setAttribute("aria-pressed", on ? "true" : "false");
      toggle.textContent = on ? "Notifications on (turn off)" : "Notify me";
    };
    toggle.hidden = false;
    show();
    toggle.addEventListener("click", function () {
      if (localStorage.getItem(notifyKey) === "on") { localStorage.removeItem(notifyKey); show(); return; }
      Notification.requestPermission().then(function (answer) {
        if (answer === "granted") localStorage.setItem(notifyKey, "on");
        show();
      });
    });
  });

  connect();

  // ---- filters: the queue applies as you type, the digest on each change; both keep them in the URL ----------
  if (form && filtered) {
    let timer = null;
    const apply = function () {
      const params = new URLSearchParams();
      new FormData(form).forEach(function (value, key) { if (value) params.set(key, value); });
      const qs = params.toString();
      history.replaceState(null, "", qs ? "?" + qs : window.location.pathname);
      patch();
    };
    // the digest's custom time is applied when complete (change), not at every keystroke
    form.addEventListener(live === "queue" ? "input" : "change", function (ev) {
      clearTimeout(timer);
      timer = setTimeout(apply, ev.target.type === "search" ? 200 : 0);
    });
    form.addEventListener("submit", function (ev) { ev.preventDefault(); clearTimeout(timer); apply(); });
  }

  // ---- "re-read now": POST with the CSRF header; the SSE change event brings the new data --------------------
  document.addEventListener("submit", function (ev) {
    const f = ev.target;
    if (!f.matches || !f.matches('form[data-enhance="refresh"]')) return;
    ev.preventDefault();
    const button = f.querySelector("button");
    button.disabled = true;
    fetch(f.action, { method: "POST", credentials: "same-origin",
                      headers: { "X-CSRF-Token": csrf, Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error(r.status); patch([Number(main.dataset.repoId)]); })
      .catch(function () { setStatus("off", "re-read failed"); })
      .finally(function () { button.disabled = false; });
  });

  // ---- decisions (approve, reject): sent by script with the tab's decision key, never as a bare form ------
  // When a passkey must confirm it, the server's options (a challenge bound to this proposal) are signed
  // first, with user verification, and the assertion goes with the decision.
  function post(url, body) {
    return fetch(url, { method: "POST", credentials: "same-origin", body: JSON.stringify(body || {}),
                        headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRF-Token": csrf,
                                   "X-Fleetdeck-Decision": localStorage.getItem(decisionKey) || "" } })
      .then(function (r) {
        return r.json().then(function (j) {
          if (!r.ok) throw new Error(j.error ? j.error.message : "refused");
          return j;
        });
      });
  }
  function passkeyFor(url) {
    return post(url).then(function (need) {
      if (!need.required) return null;
      return navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(need.options) })
        .then(function (cred) { return cred.toJSON(); });
    });
  }
  document.addEventListener("submit", function (ev) {
    const f = ev.target;
    if (!f.matches || !f.matches('form[data-enhance="decide"]')) return;
    ev.preventDefault();
    const alert = document.getElementById(f.dataset.error);
    const fail = function (text) { alert.textContent = text; alert.hidden = false; };
    if (!localStorage.getItem(decisionKey)) {
      fail("This browser holds no decision key: open a fresh link (fleetdeck dashboard link).");
      return;
    }
    const button = f.querySelector("button");
    const body = {};
    new FormData(f).forEach(function (value, key) { body[key] = value; });
    button.disabled = true;
    passkeyFor(f.dataset.passkey)
      .then(function (passkey) { if (passkey) body.passkey = passkey; return post(f.action, body); })
      .then(function () { window.location.assign(f.dataset.done); })
      .catch(function (err) { fail(err.message); })
      .finally(function () { button.disabled = false; });
  });

  // ---- passkeys: register one (the page's form), with user verification ----------------------------------
  const register = document.getElementById("passkey-register");
  if (register) {
    register.addEventListener("submit", function (ev) {
      ev.preventDefault();
      const said = document.getElementById("passkey-status");
      post(register.dataset.options)
        .then(function (options) {
          return navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) });
        })
        .then(function (cred) { return post(register.action, { credential: cred.toJSON(), name: register.elements.name.value }); })
        .then(function () { window.location.reload(); })
        .catch(function (err) { said.textContent = "Not registered: " + err.message; });
    });
  }

  // ---- keyboard: / search, j/k move through the queue's repos or the inbox's items (Enter opens the focused
  // link: the repo, the proposal), g back to the queue ------------------------------------------------------------
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const tag = (ev.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "select" || tag === "textarea") {
      if (ev.key === "Escape") ev.target.blur();
      return;
    }
    if (ev.key === "/") {
      const search = document.getElementById("f-q");
      if (search) { ev.preventDefault(); search.focus(); search.select(); }
    } else if (ev.key === "j" || ev.key === "k") {
      const links = Array.prototype.slice.call(document.querySelectorAll(".queue .repo-link"));
      if (!links.length) return;
      const at = links.indexOf(document.activeElement);
      const next = ev.key === "j" ? Math.min(links.length - 1, at + 1) : Math.max(0, at < 0 ? 0 : at - 1);
      links[next].focus();
      links[next].closest("tr, li").scrollIntoView({ block: "nearest" });
      ev.preventDefault();
    } else if (ev.key === "g" && window.location.pathname !== urls.home) {
      window.location.href = urls.home;
    }
  });
})();
