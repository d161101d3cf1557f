// A sign-in link carries the token in its fragment (never sent to the server or its logs):
// fill the form with it and send it once.
document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("signin");
  const m = location.hash.match(/token=([A-Za-z0-9_\-]+)/);
  if (form && m) {
    history.replaceState(null, "", location.pathname);
    form.querySelector("#token").value = m[1];
    form.submit();
  }
  const all = document.getElementById("all");
  if (all) {
    all.addEventListener("change", () => {
      document.querySelectorAll("input.pick").forEach((box) => { box.checked = all.checked; });
    });
  }
  countdown();
  keys();
});

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
// / goes to the search. Nothing fires while typing in a field.
function keys() {
  const cards = Array.from(document.querySelectorAll("li.gate[data-href]"));
  let at = -1;
  const show = (i) => {
    if (!cards.length) return;
    at = Math.max(0, Math.min(cards.length - 1, i));
    cards.forEach((c, k) => c.classList.toggle("current", k === at));
    cards[at].focus({ preventScroll: true });
    cards[at].scrollIntoView({ block: "nearest" });
  };
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(t.tagName))) return;
    const go = (sel) => { const a = document.querySelector(sel); if (a) location.href = a.href; };
    if (cards.length) {
      if (e.key === "j") { show(at + 1); e.preventDefault(); }
      else if (e.key === "k") { show(at - 1); e.preventDefault(); }
      else if ((e.key === "o" || e.key === "Enter") && at >= 0) { location.href = cards[at].dataset.href; e.preventDefault(); }
      else if (e.key === "a" && at >= 0) {
        const b = cards[at].querySelector("button.approve");
        if (b) { b.click(); e.preventDefault(); }
      }
      else if (e.key === "/") { const q = document.querySelector('input[name="q"]'); if (q) { q.focus(); e.preventDefault(); } }
    } else if (document.body.classList.contains("gatepage")) {
      if (e.key === "j") go("#nextgate");
      else if (e.key === "k") go("#prevgate");
      else if (e.key === "a") {
        const b = document.querySelector('section.answer form.tap input[value="approve"] ~ button.approve');
        if (b) { b.click(); e.preventDefault(); }
      }
    }
  });
}
