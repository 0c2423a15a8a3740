// The run page's live output: appends each line the server sends and
// reloads when the run ends, for its replay.
(function () {
  var log = document.getElementById("log");
  if (!log || !log.dataset.stream || !window.EventSource) return;
  var es = new EventSource(log.dataset.stream);
  es.addEventListener("line", function (e) {
    log.appendChild(document.createTextNode(e.data + "\n"));
    log.scrollTop = log.scrollHeight;
  });
  es.addEventListener("end", function (e) {
    es.close();
    document.getElementById("outcome").textContent = e.data;
    setTimeout(function () { location.reload(); }, 500);
  });
})();
