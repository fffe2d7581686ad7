// Live progress (docs/progress.md). Every element with data-progress-src is a progress block
// of work under way; every two seconds its fragment is fetched from that address and the
// block takes the fragment's content and attributes in place, so the page is never reloaded.
// A fragment without data-progress-src says the work ended, and polling stops. A failed fetch
// is tried again later, less often. Without scripts the page reloads itself instead (a
// <noscript> refresh).
(function () {
  "use strict";
  var every = 2000, most = 30000;

  function apply(el, next) {
    for (var i = el.attributes.length - 1; i >= 0; i--) {
      var name = el.attributes[i].name;
      if (!next.hasAttribute(name)) el.removeAttribute(name);
    }
    for (var j = 0; j < next.attributes.length; j++) {
      el.setAttribute(next.attributes[j].name, next.attributes[j].value);
    }
    el.replaceChildren.apply(el, Array.prototype.slice.call(next.childNodes));
  }

  function follow(el, wait) {
    setTimeout(function () {
      var src = el.getAttribute("data-progress-src");
      if (!src) return;
      fetch(src, { credentials: "same-origin", headers: { Accept: "text/html" }, cache: "no-store" })
        .then(function (r) {
          if (!r.ok) throw new Error("progress: " + r.status);
          return r.text();
        })
        .then(function (html) {
          var t = document.createElement("template");
          t.innerHTML = html.trim();
          var next = t.content.firstElementChild;
          if (!next) throw new Error("progress: empty fragment");
          apply(el, next);
          follow(el, every);
        })
        .catch(function () {
          follow(el, Math.min(most, wait * 2));
        });
    }, wait);
  }

  function start() {
    var blocks = document.querySelectorAll("[data-progress-src]");
    for (var i = 0; i < blocks.length; i++) follow(blocks[i], every);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
