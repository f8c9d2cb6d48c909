// The vault of protected chats: its state in the page's header, and one dialog that sets it
// up (the passphrase twice, then the recovery key, shown once, until the user says it is
// saved) or unlocks it (the passphrase, or the recovery key and a new passphrase). Plain JS,
// no inline script; requests go through session.js (NL.api).
//
// NL.vault.ask(reason, then) asks for the vault (set up when there is none) and runs `then`
// once it is open; the page learns of changes through NL.vault.on("opened" | "locked", fn):
// "opened" runs before `then` (to show again what was locked), "locked" when the user locked
// it here or the window's time ran out.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const hooks = { opened: [], locked: [] };
  let status = null;        // GET /api/v1/vault: {exists, unlocked, expires_time, generation}
  let timer = 0;
  let afterOpen = null;     // what asked for the vault, to do once it is open

  const clock = (ms) => new Date(Number(ms)).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });

  async function emit(kind) {
    for (const fn of hooks[kind]) await fn();
  }

  async function load() {
    try {
      status = await NL.api("GET", "/api/v1/vault");
    } catch (err) {
      if (err.status === 401) return status;
      status = null;  // a credential that may not use the vault: the controls stay hidden
    }
    show();
    return status;
  }

  function show() {
    $("vault-controls").hidden = !status;
    clearTimeout(timer);
    if (!status) return;
    const v = status;
    const state = $("vault-state");
    const text = !v.exists ? "No vault" : v.unlocked ? `Vault unlocked${v.expires_time ? ` until ${clock(v.expires_time)}` : ""}`
      : "Vault locked";
    const icon = v.exists ? NL.h("span", { class: `icon ${v.unlocked ? "icon-unlocked" : "icon-lock"}`, "aria-hidden": "true" }) : "";
    state.replaceChildren(icon, text);
    state.title = v.unlocked && v.expires_time ? new Date(v.expires_time).toLocaleString() : "";
    state.dataset.state = !v.exists ? "none" : v.unlocked ? "unlocked" : "locked";
    const button = $("vault-button");
    button.textContent = !v.exists ? "Set up vault" : v.unlocked ? "Lock" : "Unlock";
    button.setAttribute("aria-label", !v.exists ? "Set up vault" : v.unlocked ? "Lock your vault" : "Unlock your vault");  // the name holds the visible text (WCAG 2.5.3)
    // The window closes on its own: the page then shows what it shows a locked vault.
    if (v.unlocked && v.expires_time) {
      timer = setTimeout(expired, Math.min(Math.max(0, v.expires_time - Date.now()) + 1000, 2 ** 31 - 1));
    }
  }

  async function expired() {
    await load();
    if (status && status.exists && !status.unlocked) await emit("locked");
  }

  // The dialog for `mode` ("setup" or "unlock"), saying `reason`.
  function open(mode, reason) {
    const dialog = $("vault-dialog");
    $("vault-title").textContent = mode === "setup" ? "Set up your vault" : "Unlock your vault";
    $("vault-setup").hidden = mode !== "setup";
    $("vault-unlock").hidden = mode !== "unlock";
    $("vault-recovery").hidden = true;
    $("vault-reason").textContent = reason || "";
    $("vault-reason").hidden = !reason;
    for (const id of ["vault-setup-error", "vault-unlock-error"]) $(id).hidden = true;
    useRecovery(false);
    if (!dialog.open) dialog.showModal();
    $(mode === "setup" ? "vault-new" : "vault-passphrase").focus();
  }

  // Ask for the vault (to set it up when there is none), then do `then`.
  function ask(reason, then) {
    afterOpen = then || null;
    open(status && !status.exists ? "setup" : "unlock", reason);
  }

  function fail(id, text, input) {
    const box = $(id);
    box.textContent = text;
    box.hidden = false;
    if (input) { input.focus(); input.select(); }
  }

  function useRecovery(on) {
    $("vault-pass-fields").hidden = on;
    $("vault-recover-fields").hidden = !on;
    const toggle = $("vault-use-recovery");
    toggle.setAttribute("aria-expanded", String(on));
    toggle.textContent = on ? "Use the passphrase instead" : "Lost it? Use the recovery key";
  }

  async function setup(e) {
    e.preventDefault();
    const a = $("vault-new").value, b = $("vault-new2").value;
    if (a.length < 8) return fail("vault-setup-error", "The passphrase needs at least 8 characters.", $("vault-new"));
    if (a !== b) return fail("vault-setup-error", "The two passphrases differ: type the same one twice.", $("vault-new2"));
    let out;
    try {
      out = await NL.api("POST", "/api/v1/vault/setup", { passphrase: a });
    } catch (err) {
      if (err.status === 409) { await load(); open("unlock", "You have a vault already: unlock it."); return; }
      return fail("vault-setup-error", err.message, $("vault-new"));
    }
    $("vault-new").value = $("vault-new2").value = "";
    status = { exists: out.exists, unlocked: out.unlocked, expires_time: out.expires_time, generation: out.generation };
    show();
    // The recovery key, this once: the dialog stays until the user says it is saved.
    $("vault-title").textContent = "Save your recovery key";
    $("vault-setup").hidden = true;
    $("vault-reason").hidden = true;
    $("vault-warning").textContent = out.warning;
    $("vault-recovery-key").textContent = out.recovery_key;
    $("vault-saved").checked = false;
    $("vault-recovery-done").disabled = true;
    $("vault-recovery-status").textContent = "";
    $("vault-recovery").hidden = false;
    $("vault-recovery-key").focus();
  }

  async function recoverySaved() {
    if (!$("vault-saved").checked) return;
    $("vault-recovery-key").textContent = "";
    await opened();
  }

  async function copyRecoveryKey() {
    try {
      await navigator.clipboard.writeText($("vault-recovery-key").textContent);
      $("vault-recovery-status").textContent = "Copied.";
    } catch {
      getSelection().selectAllChildren($("vault-recovery-key"));
      $("vault-recovery-status").textContent = "Selected: copy it with Ctrl+C.";
    }
  }

  async function unlock(e) {
    e.preventDefault();
    const recovering = $("vault-pass-fields").hidden;
    const body = { ttl_seconds: Number($("vault-ttl").value) };
    if (recovering) {
      const key = $("vault-recovery-in").value.trim(), a = $("vault-reset").value, b = $("vault-reset2").value;
      if (!key) return fail("vault-unlock-error", "Type your recovery key.", $("vault-recovery-in"));
      if (a.length < 8) return fail("vault-unlock-error", "The new passphrase needs at least 8 characters.", $("vault-reset"));
      if (a !== b) return fail("vault-unlock-error", "The two new passphrases differ: type the same one twice.", $("vault-reset2"));
      Object.assign(body, { recovery_key: key, new_passphrase: a });
    } else {
      if (!$("vault-passphrase").value) return fail("vault-unlock-error", "Type your vault passphrase.", $("vault-passphrase"));
      body.passphrase = $("vault-passphrase").value;
    }
    try {
      status = await NL.api("POST", "/api/v1/vault/unlock", body);
    } catch (err) {
      if (err.status === 404) { await load(); open("setup", "You have no vault yet: set one up."); return; }
      const input = recovering ? $("vault-recovery-in") : $("vault-passphrase");
      return fail("vault-unlock-error", err.status !== 403 ? err.message
        : recovering ? "That recovery key is not right: check it and try again." : "That passphrase is not right: try again.", input);
    }
    show();
    await opened();
  }

  // Open: the dialog closes, the page shows again what was locked, then what asked goes on.
  async function opened() {
    const then = afterOpen;
    afterOpen = null;
    $("vault-dialog").close();
    await emit("opened");
    if (then) await then();
  }

  async function lock() {
    await NL.api("POST", "/api/v1/vault/lock");
    status = { ...status, unlocked: false, expires_time: null };
    show();
    await emit("locked");
  }

  function wire() {
    $("vault-button").addEventListener("click", () => {
      if (status && status.unlocked) lock().catch((err) => { $("vault-state").textContent = err.message; });
      else ask("");
    });
    $("vault-setup").addEventListener("submit", setup);
    $("vault-unlock").addEventListener("submit", unlock);
    $("vault-use-recovery").addEventListener("click", () => {
      const on = !$("vault-pass-fields").hidden;
      useRecovery(on);
      $(on ? "vault-recovery-in" : "vault-passphrase").focus();
    });
    $("vault-saved").addEventListener("change", () => { $("vault-recovery-done").disabled = !$("vault-saved").checked; });
    $("vault-recovery-done").addEventListener("click", recoverySaved);
    $("vault-recovery-copy").addEventListener("click", copyRecoveryKey);
    const dialog = $("vault-dialog");
    for (const b of dialog.querySelectorAll(".vault-cancel")) b.addEventListener("click", () => dialog.close());
    // Escape does not take the recovery key away before the user says it is saved.
    dialog.addEventListener("cancel", (e) => { if (!$("vault-recovery").hidden) e.preventDefault(); });
    dialog.addEventListener("close", () => {
      if (dialog.open) return;  // opened again already (the close event comes a task later)
      afterOpen = null;
      $("vault-recovery-key").textContent = "";
      for (const input of dialog.querySelectorAll("input:not([type=checkbox])")) input.value = "";
    });
  }

  function on(kind, fn) { hooks[kind].push(fn); }

  // The page calls it once signed in.
  async function init() {
    wire();
    await load();
  }

  window.NL.vault = { init, load, ask, lock, on, status: () => status, clock };
})();
