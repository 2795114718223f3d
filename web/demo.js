// The demo page's script, a file of its own: the page's Content-Security-Policy allows scripts from this origin only (no inline script).
(function () {
  var siteId = new URLSearchParams(location.search).get('site_id');
  document.getElementById('origin').textContent = location.origin;
  document.getElementById('snippet').textContent =
    '<script src="' + location.origin + '/widget.js" data-site-id="' + (siteId || 'site_…') + '" async><\/script>';
  if (!siteId) {
    document.getElementById('missing').hidden = false;
    return;
  }
  var s = document.createElement('script');
  s.src = '/widget.js';
  s.setAttribute('data-site-id', siteId);
  // The widget's optional attributes, from the address: ?greeting=…&starters=a|b&open=1&silence_ms=…
  var q = new URLSearchParams(location.search);
  [['greeting', 'data-greeting'], ['starters', 'data-starters'], ['open', 'data-open'], ['silence_ms', 'data-silence-ms']].forEach(function (p) {
    if (q.has(p[0])) s.setAttribute(p[1], q.get(p[0]));
  });
  document.body.appendChild(s);
})();
