// A sign-in link carries the token in its fragment (never sent to the server or its logs):
// fill the form with it and send it once.
const LOADED = performance.now();
const SHOWN_MS = 1000; // an answer's card must have been on screen this long (the server checks it too)
const PLACE_KEY = "vicar.list.place";

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("signin");
  const m = location.hash.match(/token=([A-Za-z0-9_\-]+)/);
  if (form && m) {
    history.replaceState(null, "", location.pathname);
    form.querySelector("#token").value = m[1];
    form.submit();
  }
  settle();
  batch();
  countdown();
  keys();
});

// No answer from a page that came up under a second ago: the second tap of a double tap,
// a key's repeat or a second `a` lands on the page that replaced the answered one. Its
// buttons wait; a large batch's also wait for its count.
function settle() {
  const forms = Array.from(document.querySelectorAll("form[data-shown]"));
  if (!forms.length) return;
  const update = () => {
    const early = performance.now() - LOADED < SHOWN_MS;
    forms.forEach((f) => {
      const count = f.querySelector("input[data-count]");
      const typed = !count || count.value.trim() === count.dataset.count;
      f.querySelectorAll("button[type=submit], button:not([type])").forEach((b) => { b.disabled = early || !typed; });
    });
  };
  update();
  setTimeout(update, Math.max(0, SHOWN_MS - (performance.now() - LOADED)) + 20);
  forms.forEach((f) => {
    const count = f.querySelector("input[data-count]");
    if (count) count.addEventListener("input", update);
    f.addEventListener("submit", (e) => {
      if (performance.now() - LOADED < SHOWN_MS) { e.preventDefault(); return; }
      // On the list, come back where this was (the answered card's place), not at the top.
      if (f.closest("li.gate")) {
        const cards = Array.from(document.querySelectorAll("li.gate[data-href]"));
        const at = cards.indexOf(f.closest("li.gate"));
        sessionStorage.setItem(PLACE_KEY, JSON.stringify({ y: window.scrollY, at, keyed: f.dataset.keyed === "1", t: Date.now() }));
      }
    });
  });
}

// The list's boxes: "select all", and "Approve selected (n)" counting what is ticked.
function batch() {
  const go = document.getElementById("batchgo");
  if (!go) return;
  const boxes = () => Array.from(document.querySelectorAll("input.pick"));
  const count = () => {
    const n = boxes().filter((b) => b.checked).length;
    go.textContent = `${go.dataset.label} (${n})`;
    go.disabled = n === 0;
  };
  const all = document.getElementById("all");
  if (all) {
    all.addEventListener("change", () => { boxes().forEach((box) => { box.checked = all.checked; }); count(); });
  }
  boxes().forEach((b) => b.addEventListener("change", count));
  count();
}

// A held answer's seconds left, counted down. When its window has closed it is being
// sent: Undo goes, and the next page says how it went (no reload: the person may be
// typing an answer to the next gate).
function countdown() {
  const held = document.querySelectorAll("form.held[data-due]");
  if (!held.length) return;
  const tick = () => {
    let open = 0;
    held.forEach((f) => {
      const left = Math.max(0, Math.round(parseFloat(f.dataset.due) - Date.now() / 1000));
      if (left > 0) {
        f.querySelector(".left").textContent = left;
        open++;
      } else if (!f.classList.contains("closed")) {
        f.classList.add("closed");
        const said = f.querySelector("span");
        const label = said.querySelector("b");
        said.textContent = "Held: ";
        said.append(label, ". Sending now: the undo window has closed; your next page says how it went.");
        const undo = f.querySelector("button.undo");
        if (undo) undo.remove();
      }
    });
    if (open > 0) setTimeout(tick, 1000);
  };
  tick();
}

// Desktop keys: j/k move between cards (or gates on a gate's page), o/Enter open the
// current card, a approves it where the card has a one-tap Approve (or on a gate's page),
// / goes to the search. Nothing fires while typing in a field, nor on a held key's repeat.
function keys() {
  const cards = Array.from(document.querySelectorAll("li.gate[data-href]"));
  let at = -1;
  const show = (i, scroll = true) => {
    if (!cards.length) return;
    at = Math.max(0, Math.min(cards.length - 1, i));
    cards.forEach((c, k) => c.classList.toggle("current", k === at));
    cards[at].focus({ preventScroll: true });
    if (scroll) cards[at].scrollIntoView({ block: "nearest" });
  };
  // Back from an answer on the list: where it was, the selection on the card that took
  // the answered one's place.
  if (document.body.classList.contains("listpage")) {
    let place = null;
    try { place = JSON.parse(sessionStorage.getItem(PLACE_KEY) || "null"); } catch (e) { place = null; }
    sessionStorage.removeItem(PLACE_KEY);
    if (place && Date.now() - place.t < 30000) {
      window.scrollTo(0, place.y);
      if (place.keyed && place.at >= 0) show(place.at, false);
    }
  }
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.repeat) return;
    const t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(t.tagName))) return;
    const go = (sel) => { const a = document.querySelector(sel); if (a) location.href = a.href; };
    const press = (b) => {
      if (!b || b.disabled) return false; // a page on screen under a second answers nothing
      const f = b.closest("form");
      if (f) f.dataset.keyed = "1";
      b.click();
      return true;
    };
    if (e.key === "/") {
      const q = document.querySelector('input[name="q"]');
      if (q) { q.focus(); e.preventDefault(); }
    } else if (cards.length) {
      if (e.key === "j") { show(at + 1); e.preventDefault(); }
      else if (e.key === "k") { show(at - 1); e.preventDefault(); }
      else if ((e.key === "o" || e.key === "Enter") && at >= 0) { location.href = cards[at].dataset.href; e.preventDefault(); }
      else if (e.key === "a" && at >= 0) {
        if (press(cards[at].querySelector("button.approve"))) e.preventDefault();
      }
    } else if (document.body.classList.contains("gatepage")) {
      if (e.key === "j") go("#nextgate");
      else if (e.key === "k") go("#prevgate");
      else if (e.key === "a") {
        if (press(document.querySelector('section.answer form.tap input[value="approve"] ~ button.approve'))) e.preventDefault();
      }
    }
  });
}
