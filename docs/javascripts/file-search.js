/* The site search when the built site is opened from disk (file://, as after `python -m shared.bench docs --build DIR`).
   Material runs its search in a Web Worker, and Chromium refuses to start a worker from a file URL. The site
   hook (movers.cli.site.on_post_build) writes the worker's script as a string into search/worker.js and the
   index into search/search_index.js; from a file, this starts the search worker from that string as a blob.
   Served over http(s), nothing changes. Nothing is fetched from outside the site. */
(function () {
  "use strict";
  var script = document.currentScript;
  if (location.protocol !== "file:" || typeof window.Worker !== "function" || !script) {
    return;
  }
  // Parsed before Material's bundle, which starts the worker as soon as it runs.
  document.write('<script src="' + new URL("../search/worker.js", script.src).href + '"><\/script>');
  var Native = window.Worker;
  var Worker = function (url, options) {
    var source = window.__moversSearchWorker;
    if (typeof source === "string" && /\/workers\/search\.[^/]*\.js$/.test(String(url))) {
      url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
    }
    return new Native(url, options);
  };
  Worker.prototype = Native.prototype;
  window.Worker = Worker;
})();
