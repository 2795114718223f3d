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
  // The widget's optional attributes, from the address: ?greeting=…&starters=a|b&open=1&silence_ms=…&language=fr&user_id=…&user_hash=…
  var q = new URLSearchParams(location.search);
  [
    ['greeting', 'data-greeting'],
    ['starters', 'data-starters'],
    ['open', 'data-open'],
    ['silence_ms', 'data-silence-ms'],
    ['language', 'data-language'],
    ['user_id', 'data-user-id'],
    ['user_hash', 'data-user-hash'],
  ].forEach(function (p) {
    if (q.has(p[0])) s.setAttribute(p[1], q.get(p[0]));
  });
  // The host page itself, to try the widget on: ?page_bg=%23111111 (a dark page), ?page_lang=ar (a right-to-left page).
  if (/^#[0-9a-f]{6}$/i.test(q.get('page_bg') || '')) {
    document.body.style.background = q.get('page_bg');
    document.body.style.color = '#f4f4f5';
  }
  if (q.get('page_lang')) {
    document.documentElement.lang = q.get('page_lang');
    document.documentElement.dir = q.get('page_lang') === 'ar' ? 'rtl' : 'ltr';
  }
  document.body.appendChild(s);
})();
