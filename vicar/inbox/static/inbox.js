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
});
