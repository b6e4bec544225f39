/* Live refresh: reload the page every few seconds while its box is ticked.
 *
 * The box is #sq-live-refresh (steady_queue/admin/live_refresh.html); its
 * data-key names the page, data-seconds the interval. The choice is kept in
 * localStorage per page, so it survives reloads and is off until ticked.
 * A static file rather than an inline script: a Content-Security-Policy
 * without 'unsafe-inline' lets it run.
 */
"use strict";
(function () {
  const box = document.getElementById("sq-live-refresh");
  if (!box) {
    return;
  }
  const key = "steady_queue.live_refresh." + (box.dataset.key || "page");
  const seconds = Math.max(parseInt(box.dataset.seconds, 10) || 5, 1);
  let timer = null;

  function remembered() {
    try {
      return window.localStorage.getItem(key) === "on";
    } catch (error) {
      return false; // storage refused (private mode, policy): stay off
    }
  }

  function remember(on) {
    try {
      if (on) {
        window.localStorage.setItem(key, "on");
      } else {
        window.localStorage.removeItem(key);
      }
    } catch (error) {
      // Not remembered; the box still works on this page.
    }
  }

  // A reload would throw away what the operator is doing: typing in a field,
  // or rows ticked for an action. Wait until they are done. A tab no one
  // looks at waits too, sparing the database its queries.
  function busy() {
    if (document.hidden) {
      return true;
    }
    const active = document.activeElement;
    if (active && active !== box && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName)) {
      return true;
    }
    return document.querySelector("input.action-select:checked") !== null;
  }

  function schedule() {
    window.clearTimeout(timer);
    if (!box.checked) {
      return;
    }
    timer = window.setTimeout(function () {
      if (busy()) {
        schedule();
      } else {
        window.location.reload();
      }
    }, seconds * 1000);
  }

  box.checked = remembered();
  box.addEventListener("change", function () {
    remember(box.checked);
    schedule();
  });
  schedule();
})();
