// Classic (non-module) script: runs even where module scripts cannot, to explain why the
// page does nothing when it was opened from disk. Browsers refuse ES modules and
// WebAssembly fetches on file:// pages, so the page needs a static server (any will do).
(function () {
  if (location.protocol !== "file:") return;
  document.addEventListener("DOMContentLoaded", function () {
    var note = document.querySelector("#boot-note");
    if (!note) return;
    note.className = "boot-file";
    note.textContent = "";
    var p = document.createElement("p");
    p.textContent =
      "This page was opened from disk (file://). Browsers do not run WebAssembly modules from file:// pages, so serve the folder instead (nothing is uploaded; the server only hands the page its own files):";
    var pre = document.createElement("pre");
    pre.textContent = "python3 -m http.server 8000 --bind 127.0.0.1 --directory wasm/www\n# then open http://127.0.0.1:8000/";
    note.appendChild(p);
    note.appendChild(pre);
  });
})();
