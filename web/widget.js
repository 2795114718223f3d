/*
 * Concierge chat widget. Plain browser JavaScript, no build step, no dependencies. Uses only
 * the public widget API (/api/public/widget/*, header X-Concierge-Site) and the receive-only
 * reply socket /api/chat/connect.
 *
 *   <script src="https://HOST/widget.js" data-site-id="site_..." async></script>
 *
 * Optional attributes: data-greeting (the first message shown; default: the agent's
 * greeting, else a short hello), data-starters (starter questions separated by "|"),
 * data-open (open on the first visit; later visits remember open or closed), data-api-base
 * (default: this script's origin), data-silence-ms (reconnect the socket after this long
 * without any frame; default 75000).
 *
 * Model text is never parsed as HTML: replies are rendered from a small Markdown subset by
 * building DOM nodes (text nodes only), links must be https, charts are SVG built from data.
 */
(() => {
  'use strict';
  var script = document.currentScript;
  if (!script || window.ConciergeWidget) return;
  var attr = (n) => script.getAttribute('data-' + n);
  var siteId = attr('site-id');
  var apiBase = (attr('api-base') || new URL(script.src, location.href).origin).replace(/\/+$/, '');
  // The server pings every 30 s; about 75 s of silence means the connection is dead.
  var silenceMs = Number(attr('silence-ms')) || 75000;
  var convKey = 'concierge:conversation:' + siteId;
  var openKey = 'concierge:open:' + siteId;
  var store = {
    get: (k) => { try { return localStorage.getItem(k); } catch (e) { return null; } },
    set: (k, v) => { try { localStorage.setItem(k, v); } catch (e) { /* storage blocked */ } },
  };

  var handlers = {};
  function emit(event, detail) {
    (handlers[event] || []).slice().forEach((fn) => {
      try { fn(detail); } catch (e) { setTimeout(() => { throw e; }); }
    });
  }

  var session = null; // init response
  var agentName = 'Assistant';
  var sock = null;
  var sockOpen = null; // resolves when the current socket is open (or has failed)
  var silenceTimer = 0;
  var retryTimer = 0;
  var retryDelay = 1000;
  var nextBefore = null;
  var failed = {}; // reply ids that ended in an error frame
  var pending = {}; // reply id -> the visitor's row it answers
  var following = null; // the reply row the log follows while it grows
  var lastTop = 0;
  var isDown = false; // the socket dropped and is being dialled again

  // ---- DOM helpers: text goes in as text nodes, never as markup.
  function h(tag, props, kids) {
    var el = document.createElement(tag);
    for (var k in props || {}) {
      var v = props[k];
      if (v == null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v);
    }
    (kids || []).forEach((c) => { if (c != null) el.append(c); });
    return el;
  }
  var SVG = 'http://www.w3.org/2000/svg';
  function s(tag, props, kids) {
    var el = document.createElementNS(SVG, tag);
    for (var k in props) el.setAttribute(k, props[k]);
    (kids || []).forEach((c) => { el.append(c); });
    return el;
  }
  function https(u) {
    try { var x = new URL(u); return x.protocol === 'https:' ? x.href : null; } catch (e) { return null; }
  }
  function link(url, kids) {
    return h('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, kids);
  }
  var ICON = {
    chat: '<svg viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z"/></svg>',
    down: '<svg viewBox="0 0 24 24" aria-hidden="true"><path fill="none" stroke="currentColor" stroke-width="2.5" stroke-linecap="round" d="M6 9l6 6 6-6"/></svg>',
    x: '<svg viewBox="0 0 24 24" aria-hidden="true"><path stroke="currentColor" stroke-width="2.2" stroke-linecap="round" d="M6 6l12 12M18 6 6 18"/></svg>',
    send: '<svg viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M3 20.5 21 12 3 3.5l.01 6.6L15 12 3.01 13.9z"/></svg>',
    mic: '<svg viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M12 14a3 3 0 0 0 3-3V5a3 3 0 0 0-6 0v6a3 3 0 0 0 3 3zm5-3a5 5 0 0 1-10 0H5a7 7 0 0 0 6 6.9V21h2v-3.1a7 7 0 0 0 6-6.9z"/></svg>',
  };

  // ---- Markdown subset: paragraphs, headings (as bold), bold, italics, inline code, code
  // blocks, lists, quotes, tables, https links. Anything else stays text.
  var INLINE = /(`+)([^`]+?)\1|\*\*(.+?)\*\*|__(.+?)__|\*(?=\S)(.+?)\*|\b_(?=\S)(.+?)_\b|\[([^\]]+)\]\(([^()\s]*(?:\([^()\s]*\)[^()\s]*)*)\)|(https:\/\/[^\s<>()]*[^\s<>().,;:!?'"])/g;
  function inline(text) {
    var out = [];
    var last = 0;
    for (var m of String(text).matchAll(INLINE)) {
      if (m.index > last) out.push(text.slice(last, m.index));
      last = m.index + m[0].length;
      var url = https(m[8] || m[9]);
      if (m[2]) out.push(h('code', {}, [m[2]]));
      else if (m[3] || m[4]) out.push(h('strong', {}, inline(m[3] || m[4])));
      else if (m[5] || m[6]) out.push(h('em', {}, inline(m[5] || m[6])));
      else if (m[7]) out.push(url ? link(url, inline(m[7])) : m[7]);
      else out.push(url ? link(url, [m[9]]) : m[9]);
    }
    if (last < text.length) out.push(text.slice(last));
    return out;
  }
  var LIST = /^\s*([-*+]|\d{1,9}[.)])\s+(.*)$/;
  var cells = (l) => l.trim().replace(/^\||\|$/g, '').split('|').map((c) => c.trim());
  var isTable = (l, next) => /^\s*\|.*\|\s*$/.test(l) && /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/.test(next || '');
  var isBlock = (l, next) => /^\s*(```|>|#{1,6}\s)/.test(l) || LIST.test(l) || isTable(l, next);
  function md(text) {
    var frag = document.createDocumentFragment();
    var lines = String(text || '').replace(/\r\n?/g, '\n').split('\n');
    var i = 0;
    var m;
    while (i < lines.length) {
      var line = lines[i];
      if (!line.trim()) { i++; continue; }
      if (/^\s*```/.test(line)) {
        var code = [];
        while (++i < lines.length && !/^\s*```/.test(lines[i])) code.push(lines[i]);
        i++;
        frag.append(h('pre', {}, [h('code', {}, [code.join('\n')])]));
      } else if ((m = /^\s*#{1,6}\s+(.*)$/.exec(line))) {
        frag.append(h('p', {}, [h('strong', {}, inline(m[1]))]));
        i++;
      } else if (/^\s*>/.test(line)) {
        var quote = [];
        while (i < lines.length && /^\s*>/.test(lines[i])) quote.push(lines[i++].replace(/^\s*> ?/, ''));
        frag.append(h('blockquote', {}, [md(quote.join('\n'))]));
      } else if (isTable(line, lines[i + 1])) {
        var head = cells(line);
        var align = cells(lines[i + 1]).map((c) => (/^:-+:$/.test(c) ? 'center' : /-:$/.test(c) ? 'right' : null));
        var body = h('tbody');
        i += 2;
        while (i < lines.length && /^\s*\|/.test(lines[i])) {
          body.append(h('tr', {}, cells(lines[i++]).slice(0, head.length).map((c, k) => h('td', { class: align[k] }, inline(c)))));
        }
        frag.append(h('table', {}, [h('thead', {}, [h('tr', {}, head.map((c, k) => h('th', { scope: 'col', class: align[k] }, inline(c))))]), body]));
      } else if ((m = LIST.exec(line))) {
        var ordered = /\d/.test(m[1]);
        var list = h(ordered ? 'ol' : 'ul', ordered && parseInt(m[1], 10) !== 1 ? { start: parseInt(m[1], 10) } : {});
        var li = null;
        while (i < lines.length) {
          m = LIST.exec(lines[i]);
          if (m && /\d/.test(m[1]) === ordered) list.append((li = h('li', {}, inline(m[2]))));
          else if (!m && li && /^\s+\S/.test(lines[i])) li.append(' ', ...inline(lines[i].trim()));
          else break;
          i++;
        }
        frag.append(list);
      } else {
        var p = h('p');
        do {
          if (p.firstChild) p.append(h('br'));
          p.append(...inline(lines[i++]));
        } while (i < lines.length && lines[i].trim() && !isBlock(lines[i], lines[i + 1]));
        frag.append(p);
      }
    }
    return frag;
  }
  /** What a screen reader hears of a reply: its text without the Markdown marks. */
  var plain = (text) => String(text || '').replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/[*_`]+/g, '').replace(/[#>|]+|-{3,}/g, ' ').replace(/\s+/g, ' ').trim();

  // ---- Charts: inline SVG built from the declarative spec (bar | line | pie), never code.
  var COLORS = ['#3057d5', '#c2530a', '#217a4f', '#b3245a', '#6741d9', '#4b5563'];
  function chart(c) {
    var labels = (c.labels || []).map(String);
    var series = (c.series || []).filter((x) => x && Array.isArray(x.values));
    if (!labels.length || !series.length) return null;
    var num = (v) => (isFinite(v) ? Number(v) : 0);
    var desc = series.map((x) => (series.length > 1 ? x.name + ': ' : '') + labels.map((l, i) => l + ' ' + num(x.values[i])).join(', ')).join('; ');
    var svg = s('svg', { viewBox: '0 0 300 170', role: 'img', 'aria-label': (c.title ? c.title + ', ' : '') + c.type + ' chart: ' + desc });
    var legend = [];
    var tip = (el, text) => { el.append(s('title', {}, [text])); return el; };
    if (c.type === 'pie') {
      var vals = series[0].values.map((v) => Math.max(0, num(v)));
      var total = vals.reduce((a, b) => a + b, 0) || 1;
      var a = -Math.PI / 2;
      var pt = (t) => (150 + 78 * Math.cos(t)).toFixed(2) + ' ' + (85 + 78 * Math.sin(t)).toFixed(2);
      vals.forEach((v, i) => {
        var fill = COLORS[i % COLORS.length];
        legend.push([labels[i] + ' (' + v + ')', fill]);
        if (!v) return;
        var b = a + (v / total) * 2 * Math.PI;
        svg.append(tip(v >= total ? s('circle', { cx: 150, cy: 85, r: 78, fill: fill }) : s('path', { fill: fill, d: 'M150 85L' + pt(a) + 'A78 78 0 ' + (b - a > Math.PI ? 1 : 0) + ' 1 ' + pt(b) + 'Z' }), labels[i] + ': ' + v));
        a = b;
      });
    } else {
      var all = [].concat(...series.map((x) => x.values.map(num)));
      var max = Math.max(0, ...all);
      var min = Math.min(0, ...all);
      if (max === min) max = min + 1;
      var L = 40, R = 294, T = 12, B = 136;
      var y = (v) => B - ((v - min) / (max - min)) * (B - T);
      var step = (R - L) / labels.length;
      var text = (x, yy, t, anchor) => s('text', { x: x, y: yy, 'text-anchor': anchor, 'font-size': 10, fill: '#3f3f46' }, [t]);
      var fmt = (v) => String(Math.round(v * 100) / 100);
      svg.append(s('line', { x1: L, x2: R, y1: y(0), y2: y(0), stroke: '#71717a' }), text(L - 4, T + 4, fmt(max), 'end'), text(L - 4, y(min) + 3, fmt(min), 'end'));
      labels.forEach((l, i) => {
        var room = Math.max(3, Math.floor(step / 6));
        svg.append(text(L + step * (i + 0.5), 154, l.length > room ? l.slice(0, room - 1) + '\u2026' : l, 'middle'));
      });
      series.forEach((x, k) => {
        var fill = COLORS[k % COLORS.length];
        legend.push([x.name, fill]);
        var w = (step * 0.7) / series.length;
        var points = labels.map((l, i) => {
          var v = num(x.values[i]);
          if (c.type === 'bar') {
            svg.append(tip(s('rect', { x: (L + step * i + step * 0.15 + w * k).toFixed(2), y: Math.min(y(v), y(0)).toFixed(2), width: Math.max(1, w - 1).toFixed(2), height: Math.abs(y(v) - y(0)).toFixed(2), fill: fill }), l + ': ' + v));
          }
          return (L + step * (i + 0.5)).toFixed(2) + ',' + y(v).toFixed(2);
        });
        if (c.type === 'line') {
          svg.append(s('polyline', { points: points.join(' '), fill: 'none', stroke: fill, 'stroke-width': 2 }));
          points.forEach((p, i) => { svg.append(tip(s('circle', { cx: p.split(',')[0], cy: p.split(',')[1], r: 3, fill: fill }), labels[i] + ': ' + num(x.values[i]))); });
        }
      });
      if (series.length < 2) legend = [];
    }
    return h('figure', { class: 'chart' }, [
      c.title ? h('figcaption', {}, [String(c.title)]) : null,
      svg,
      legend.length ? h('ul', { class: 'legend', 'aria-hidden': 'true' }, legend.map((e) => { var sw = h('span'); sw.style.background = e[1]; return h('li', {}, [sw, e[0]]); })) : null,
    ]);
  }

  function card(c) {
    var img = https(c.image_url);
    var buttons = (c.buttons || []).slice(0, 3).map((b) => {
      var url = https(b.url);
      if (url) return link(url, [String(b.label)]);
      return b.reply ? h('button', { type: 'button', onclick: () => { void send(b.reply); } }, [String(b.label)]) : null;
    });
    return h('div', { class: 'card' }, [
      img ? h('img', { src: img, alt: '', loading: 'lazy', referrerpolicy: 'no-referrer' }) : null,
      h('div', { class: 'ct' }, [String(c.title || '')]),
      c.text ? h('p', {}, [String(c.text)]) : null,
      buttons.some(Boolean) ? h('div', { class: 'cb' }, buttons) : null,
    ]);
  }

  /** A file's title from its name: "returns-policy_v2.md" → "Returns policy v2". */
  function titleOf(name) {
    var t = String(name || '').replace(/\.[a-z0-9]{1,5}$/i, '').replace(/[-_]+/g, ' ').replace(/\s+/g, ' ').trim();
    return t && t[0].toUpperCase() + t.slice(1);
  }

  // ---- Shell (static markup only; shadow root: host page CSS does not leak in, ours does not leak out)
  var host = document.createElement('div');
  host.setAttribute('data-concierge-widget', '');
  host.hidden = true; // shown once the site is known
  var root = host.attachShadow({ mode: 'open' });
  root.innerHTML =
    '<style>' +
    ':host{all:initial}*{box-sizing:border-box}[hidden]{display:none!important}' +
    '.w{--c:#243b6b;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1b1f}' +
    'button,textarea{font:inherit;color:inherit}' +
    ':focus-visible{outline:3px solid #4c7dff;outline-offset:2px}' +
    '.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}' +
    '.launcher{position:fixed;right:20px;bottom:calc(20px + env(safe-area-inset-bottom));z-index:2147483000;width:56px;height:56px;border-radius:50%;border:0;background:var(--c);color:#fff;cursor:pointer;box-shadow:0 4px 16px rgba(0,0,0,.25);display:grid;place-items:center;transition:transform .15s}' +
    '.launcher:hover{transform:scale(1.06)}.unread::after{content:"";position:absolute;top:2px;right:2px;width:14px;height:14px;border-radius:50%;background:#e11d48;border:2px solid #fff}.launcher svg{width:28px;height:28px}.open .launcher .i1,.launcher .i2{display:none}.open .launcher .i2{display:block}' +
    '.panel{position:fixed;right:20px;bottom:calc(88px + env(safe-area-inset-bottom));z-index:2147483000;width:380px;height:min(640px,calc(100vh - 112px));display:flex;flex-direction:column;background:#fff;border-radius:16px;box-shadow:0 8px 40px rgba(0,0,0,.22);overflow:hidden}' +
    '@media (max-width:479.98px){.panel{inset:0;width:100%;height:100vh;height:100dvh;border-radius:0;padding:env(safe-area-inset-top) env(safe-area-inset-right) env(safe-area-inset-bottom) env(safe-area-inset-left)}.open .launcher{display:none}}' +
    'header{display:flex;align-items:center;gap:10px;padding:12px 14px;background:var(--c);color:#fff}' +
    '.av{width:36px;height:36px;border-radius:50%;background:rgba(255,255,255,.2);display:grid;place-items:center;font-weight:700}' +
    'h2{flex:1;margin:0;font-size:16px;font-weight:600;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}' +
    'header button{width:44px;height:44px;margin:-6px -8px -6px 0;border:0;background:none;color:#fff;cursor:pointer;border-radius:8px;display:grid;place-items:center}header svg{width:22px;height:22px}' +
    '.conn,.err{padding:6px 14px;font-size:13px;background:#fff4d6;color:#5c4200}.err{background:#fdecee;color:#8a0016}' +
    '.log{position:relative;flex:1;overflow-y:auto;padding:14px;overscroll-behavior:contain}.log,.msgs{display:flex;flex-direction:column;gap:10px}' +
    '.row{display:flex;flex-direction:column;align-items:flex-start;max-width:88%}.row.user{align-self:flex-end;align-items:flex-end}' +
    '.who{font-size:12px;color:#52525b;margin:0 4px 2px}' +
    '.b{padding:8px 12px;border-radius:14px;background:#f0f2f7;overflow-wrap:anywhere;max-width:100%}' +
    '.user .b{background:var(--c);color:#fff;white-space:pre-wrap;border-bottom-right-radius:4px}.assistant .b{border-top-left-radius:4px}' +
    '.b p,.b ul,.b ol,.b blockquote,.b pre,.b table{margin:0 0 .6em}.b>:last-child{margin-bottom:0}.b ul,.b ol{padding-left:1.3em}' +
    '.b blockquote{border-left:3px solid #b8bfd0;padding-left:8px;color:#3f3f46}.b a{color:#1d4ed8}' +
    '.b code{font:13px ui-monospace,monospace;background:rgba(0,0,0,.07);padding:1px 4px;border-radius:4px}.b pre{white-space:pre-wrap}.b pre code{background:none;padding:0}' +
    '.b table{border-collapse:collapse;font-size:13px;background:#fff}.b th,.b td{border:1px solid #d4d4d8;padding:3px 6px;text-align:left}.b .center{text-align:center}.b .right{text-align:right}' +
    '.failed .b{opacity:.75}.note{font-size:12px;color:#52525b;margin:3px 4px 0;display:flex;gap:8px;align-items:center}.note.bad{color:#a0001c}' +
    '.note button,.more,.chips button,.card button,.card a{border:1px solid var(--c);color:var(--c);background:#fff;border-radius:16px;padding:4px 12px;cursor:pointer;font-size:13px;text-decoration:none;min-height:32px}' +
    '.dots{display:inline-flex;gap:4px;padding:4px 0}.dots i{width:7px;height:7px;border-radius:50%;background:#71717a;animation:bl 1s infinite}.dots i:nth-child(2){animation-delay:.2s}.dots i:nth-child(3){animation-delay:.4s}' +
    '@keyframes bl{50%{opacity:.3}}@media (prefers-reduced-motion:reduce){.dots i{animation:none}.launcher{transition:none}}' +
    '.x{display:flex;flex-direction:column;gap:8px;margin-top:6px;width:100%}' +
    '.src{display:flex;flex-wrap:wrap;gap:6px;list-style:none;margin:6px 0 0;padding:0;font-size:12px}.src li{background:#eef2ff;color:#1e3a8a;border-radius:12px;padding:2px 10px}.src:not(.att)::before{content:"Sources" / "";color:#52525b;padding:2px 0}' +
    '.card{border:1px solid #e4e4e7;border-radius:12px;overflow:hidden;background:#fff;width:260px;max-width:100%}.card img{display:block;width:100%;max-height:150px;object-fit:cover}' +
    '.ct{font-weight:600;padding:8px 12px 0}.card p{margin:4px 12px 0;font-size:14px}.cb{display:flex;flex-wrap:wrap;gap:6px;padding:10px 12px}.card a{display:inline-flex;align-items:center}' +
    '.chart{margin:0;background:#fff;border:1px solid #e4e4e7;border-radius:12px;padding:8px;width:300px;max-width:100%}.chart svg{display:block;width:100%;height:auto}figcaption{font-weight:600;font-size:13px}' +
    '.legend{display:flex;flex-wrap:wrap;gap:4px 10px;list-style:none;margin:4px 0 0;padding:0;font-size:12px}.legend span{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}' +
    '.att a{color:#1d4ed8;font-size:13px}' +
    '.more{align-self:center}.pill{position:absolute;left:50%;transform:translateX(-50%);bottom:8px;z-index:1;border:0;border-radius:16px;padding:6px 14px;min-height:32px;background:var(--c);color:#fff;font-size:13px;cursor:pointer;box-shadow:0 2px 8px rgba(0,0,0,.25)}' +
    '.foot{position:relative}.chips{display:flex;flex-wrap:wrap;gap:6px;padding:0 14px 8px;justify-content:flex-end}' +
    'form{display:flex;align-items:flex-end;gap:8px;padding:10px 12px;border-top:1px solid #e4e4e7}' +
    'textarea{flex:1;resize:none;font-size:16px;line-height:1.4;padding:9px 12px;border:1px solid #a1a1aa;border-radius:20px;min-height:44px;max-height:140px;background:#fff;overflow-y:auto}' +
    '.mic{width:44px;height:44px;flex:none;border:1px solid var(--c);border-radius:50%;background:#fff;color:var(--c);cursor:pointer;display:grid;place-items:center}.mic svg{width:20px;height:20px}.mic[aria-pressed=true]{background:#c81e3a;border-color:#c81e3a;color:#fff}' +
    '.vc{display:flex;flex-direction:column;gap:6px;padding:8px 12px;border-top:1px solid #e4e4e7;font-size:14px}.vs{font-weight:600}' +
    '.vt{max-height:120px;overflow-y:auto}.vt:empty{display:none}.vt p{margin:0 0 4px}.vt b{margin-right:4px}.vt .partial span{color:#52525b}' +
    '.vend{align-self:flex-start;border:0;border-radius:16px;padding:4px 14px;min-height:32px;background:#c81e3a;color:#fff;cursor:pointer;font-size:13px}[data-state=ended] .vend{background:#52525b}' +
    '.send{width:44px;height:44px;flex:none;border:0;border-radius:50%;background:var(--c);color:#fff;cursor:pointer;display:grid;place-items:center}.send svg{width:20px;height:20px}.send:disabled{background:#a1a1aa;cursor:default}' +
    '</style>' +
    '<div class="w">' +
    '<button type="button" class="launcher" aria-expanded="false" aria-controls="cw-panel" aria-label="Open chat"><span class="i1">' + ICON.chat + '</span><span class="i2">' + ICON.down + '</span></button>' +
    '<section class="panel" id="cw-panel" role="dialog" aria-label="Chat" hidden>' +
    '<header><div class="av" aria-hidden="true"></div><h2 class="title">Chat</h2><button type="button" class="close" aria-label="Close chat">' + ICON.x + '</button></header>' +
    '<div class="conn" role="status"></div>' +
    '<div class="err" role="alert" hidden></div>' +
    '<div class="log" role="log" aria-live="off" tabindex="0" aria-label="Messages"><button type="button" class="more" hidden>Earlier messages</button><div class="msgs"></div></div>' +
    '<div class="foot"><button type="button" class="pill" hidden>\u2193 New message</button></div>' +
    '<div class="chips" hidden></div>' +
    '<div class="sr tstat" role="status"></div><div class="sr say" aria-live="polite"></div>' +
    '<div class="vc" hidden><div class="vs" role="status"></div><div class="vt" role="log" aria-live="off" aria-label="Call transcript" tabindex="0"></div><button type="button" class="vend"></button></div>' +
    '<form><label class="sr" for="cw-input">Message</label><textarea id="cw-input" rows="1" placeholder="Write a message\u2026" maxlength="10000"></textarea>' +
    '<button type="button" class="mic" aria-label="Voice call" aria-pressed="false" hidden>' + ICON.mic + '</button>' +
    '<button type="submit" class="send" aria-label="Send" disabled>' + ICON.send + '</button></form>' +
    '</section>' +
    '</div>';
  var $ = (sel) => root.querySelector(sel);
  var wrap = $('.w');
  var panel = $('.panel');
  var launcher = $('.launcher');
  var log = $('.log');
  var msgs = $('.msgs');
  var more = $('.more');
  var pill = $('.pill');
  var conn = $('.conn');
  var errEl = $('.err');
  var chips = $('.chips');
  var typing = $('.tstat');
  var say = $('.say');
  var input = $('textarea');
  var sendBtn = $('.send');
  var form = $('form');
  conn.hidden = true;

  // ---- Open / closed, remembered per site.
  var isOpen = false;
  function setOpen(open, byUser) {
    isOpen = open;
    panel.hidden = !open;
    wrap.classList.toggle('open', open);
    launcher.setAttribute('aria-expanded', String(open));
    launcher.setAttribute('aria-label', open ? 'Close chat' : 'Open chat');
    if (open) launcher.classList.remove('unread');
    store.set(openKey, open ? '1' : '0');
    if (open) {
      syncInput();
      if (!following) log.scrollTop = log.scrollHeight;
      if (byUser) input.focus();
    } else if (byUser) launcher.focus();
    emit(open ? 'open' : 'close', {});
  }
  launcher.addEventListener('click', () => { setOpen(!isOpen, true); });
  $('.close').addEventListener('click', () => { setOpen(false, true); });
  panel.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') { ev.preventDefault(); setOpen(false, true); }
  });

  function showError(message) {
    errEl.textContent = message || '';
    errEl.hidden = !message;
  }

  // ---- Friendly words for error codes (the API's envelope codes and the socket's).
  var ERRORS = {
    offline: 'You seem to be offline. Check your connection, then retry.',
    rate_limited: 'You are sending messages very quickly. Wait a moment, then retry.',
    task_in_progress: 'Please wait until the current task has finished, then retry.',
    conversation_closed: 'This conversation has ended. Reload the page to start a new one.',
    identity_verification_failed: 'We could not confirm who you are. Reload the page and try again.',
    no_workflow_configured: 'Chat is not available right now. Please try again later.',
    workflow_provisioning: 'The assistant is just starting up. Please try again in a minute.',
    workflow_execution_failed: 'Sorry, something went wrong while answering. Please try again.',
    server: 'Something went wrong on our side. Please try again.',
  };
  ERRORS.identity_verification_required = ERRORS.identity_verification_failed;
  // The workspace's billing is its own business: a visitor is told calls are off, never that credits ran out.
  var NO_CALLS = 'Calls are not available right now. You can keep chatting here.';
  function friendly(e) {
    var code = !e.status ? 'offline' : ERRORS[e.code] ? e.code : e.status >= 500 ? 'server' : '';
    return ERRORS[code] || 'Your message could not be sent. Please retry.';
  }

  // ---- Messages: a row holds the speaker's name, the bubble, then its elements and notes.
  function byId(id) {
    var b = id ? msgs.querySelector('.msg[data-id="' + CSS.escape(id) + '"]') : null;
    return b && b.parentNode;
  }
  var stamp = (t) => new Date(t || Date.now()).toLocaleString([], { dateStyle: 'medium', timeStyle: 'short' });
  function addRow(role, id, opts, before) {
    var user = role === 'user';
    var row = h('div', { class: 'row ' + (user ? 'user' : 'assistant') }, [
      h('div', { class: user ? 'who sr' : 'who' }, [user ? 'You' : opts.author === 'human' ? 'Support team' : agentName]),
      h('div', { class: 'b msg ' + (user ? 'user' : 'assistant'), 'data-id': id, title: stamp(opts.timestamp) }),
    ]);
    row.b = row.lastChild;
    if (opts.greeting) row.b.classList.remove('msg');
    fill(row, opts);
    msgs.insertBefore(row, before || null);
    return row;
  }

  /** Renders a reply (or history message) into its row: text, then attachments, cards, charts and sources. */
  function fill(row, m) {
    row.text = m.text || '';
    row.b.textContent = '';
    // The visitor's own words are shown as typed; the agent's are Markdown.
    if (row.classList.contains('user')) row.b.textContent = row.text;
    else row.b.append(md(row.text));
    var old = row.querySelector('.x');
    if (old) old.remove();
    var atts = (m.attachments || []).map((a) => {
      var url = a && (a.file_url || a.url);
      // Signed media links may be plain http on a local install; never javascript: and the like.
      return typeof url === 'string' && /^https?:\/\//i.test(url) ? h('li', {}, [link(url, [String(a.file_name || a.name || 'Attachment')])]) : null;
    }).filter(Boolean);
    var titles = [];
    (m.citations || []).forEach((c) => {
      var t = c && (c.title || titleOf(c.file_name));
      if (t && titles.indexOf(t) < 0) titles.push(t);
    });
    var parts = [].concat(
      atts.length ? [h('ul', { class: 'att src', 'aria-label': 'Attachments' }, atts)] : [],
      (m.cards || []).map(card),
      (m.charts || []).map(chart),
      titles.length ? [h('ul', { class: 'src', 'aria-label': 'Sources' }, titles.map((t) => h('li', {}, [t])))] : [],
    ).filter(Boolean);
    if (parts.length) row.append(h('div', { class: 'x' }, parts));
  }

  function note(row, text, bad, retry) {
    var old = row.querySelector('.note');
    if (old) old.remove();
    if (!text) return;
    row.append(h('div', { class: bad ? 'note bad' : 'note' }, [
      h('span', bad ? { role: 'alert' } : {}, [text]),
      retry ? h('button', { type: 'button', onclick: retry }, ['Retry']) : null,
    ]));
  }

  function liveRow(replyId) {
    var row = byId(replyId);
    if (!row && !failed[replyId]) {
      row = addRow('assistant', replyId, {});
      row.b.classList.add('live', 'typing');
      row.b.setAttribute('aria-busy', 'true');
      row.b.append(h('span', { class: 'dots', 'aria-hidden': 'true' }, [h('i'), h('i'), h('i')]));
      typing.textContent = agentName + ' is typing\u2026';
    }
    return row;
  }

  // ---- Scrolling: a new reply is brought in from its top; the log follows a growing reply
  // only while the visitor is at the bottom, and never past the reply's first line.
  var atBottom = () => log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  function toBottom() {
    following = null;
    log.scrollTop = log.scrollHeight;
  }
  function settle(row, wasBottom, isNew) {
    if (wasBottom || following === row) {
      following = row;
      var target = Math.min(log.scrollHeight - log.clientHeight, row.offsetTop - 8);
      if (target > log.scrollTop) log.scrollTop = target;
    } else if (isNew) {
      pill.hidden = false;
      pill.row = row;
    }
  }
  log.addEventListener('scroll', () => {
    // Scrolling up is the visitor's doing (the widget only ever scrolls down): stop following.
    if (log.scrollTop < lastTop - 2) following = null;
    lastTop = log.scrollTop;
    if (atBottom()) pill.hidden = true;
  });
  pill.addEventListener('click', () => {
    pill.hidden = true;
    log.scrollTop = pill.row ? pill.row.offsetTop - 8 : log.scrollHeight;
    log.focus();
  });

  function setChips(actions) {
    chips.textContent = '';
    (actions || []).forEach((label) => {
      chips.append(h('button', { type: 'button', onclick: () => { void send(label); } }, [String(label)]));
    });
    chips.hidden = !chips.firstChild;
  }

  // ---- HTTP: every widget call carries the site id; the browser adds Origin.
  function api(method, path, body) {
    var headers = { 'X-Concierge-Site': siteId };
    if (body) headers['Content-Type'] = 'application/json';
    return fetch(apiBase + '/api/public/widget/' + path, {
      method: method,
      headers: headers,
      body: body ? JSON.stringify(body) : undefined,
      credentials: 'omit',
      // Same-origin GETs carry no Origin; the server then reads the page's origin from Referer.
      referrerPolicy: 'origin',
    }).then((res) => res.json().catch(() => null).then((data) => {
      if (res.ok) return data;
      var err = new Error((data && data.message) || 'Request failed (' + res.status + ')');
      err.code = (data && data.error) || 'http_' + res.status;
      err.status = res.status;
      throw err;
    }));
  }

  function uuid() {
    // randomUUID needs a secure context; any unique string will do.
    return crypto.randomUUID ? crypto.randomUUID() : Array.from(crypto.getRandomValues(new Uint8Array(16)), (x) => (x + 256).toString(16).slice(1)).join('');
  }

  // ---- Socket: receive-only; any frame proves it alive.
  function connect() {
    clearTimeout(retryTimer);
    var url = new URL(apiBase + '/api/chat/connect');
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('site_id', siteId);
    url.searchParams.set('conversation_id', session.conversation_id);
    var after = lastShownId();
    if (after) url.searchParams.set('after', after);
    var ws = new WebSocket(url.href);
    sock = ws;
    var opened;
    sockOpen = new Promise((resolve) => { opened = resolve; });
    ws.onopen = () => {
      if (sock !== ws) return;
      retryDelay = 1000;
      isDown = false;
      conn.hidden = true;
      armSilence();
      opened();
    };
    ws.onmessage = (ev) => {
      if (sock !== ws) return;
      armSilence();
      var frame;
      try { frame = JSON.parse(ev.data); } catch (e) { return; }
      onFrame(frame);
    };
    ws.onclose = () => {
      if (sock !== ws) return;
      down();
      opened();
      retryTimer = setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 30000);
    };
  }
  function down() {
    sock = null;
    isDown = true;
    clearTimeout(silenceTimer);
    conn.textContent = 'Reconnecting\u2026';
    conn.hidden = false;
  }
  function armSilence() {
    clearTimeout(silenceTimer);
    silenceTimer = setTimeout(() => {
      // A half-open socket may take long to report its close: drop it and dial again now.
      var dead = sock;
      sock = null;
      if (dead) dead.close();
      connect();
    }, silenceMs);
  }
  window.addEventListener('offline', () => {
    if (!session || !sock) return;
    var dead = sock;
    down();
    dead.close();
  });
  window.addEventListener('online', () => {
    // Back online: dial now rather than at the end of the back-off (a dial started offline is dropped).
    if (!session || !isDown) return;
    var stale = sock;
    sock = null;
    if (stale) stale.close();
    retryDelay = 1000;
    connect();
  });

  // The id of the newest message shown: what a reconnecting socket asks to be replayed after.
  function lastShownId() {
    var all = msgs.querySelectorAll('.msg[data-id]:not(.live)');
    return all.length ? all[all.length - 1].getAttribute('data-id') : null;
  }

  function onFrame(frame) {
    if (!frame || typeof frame.type !== 'string' || frame.type === 'ping') return;
    var wasBottom = atBottom();
    if (frame.type === 'visitor_message') {
      // The visitor's own message sent from another tab or device: shown once, before the reply that answers it.
      var known = byId(frame.message_id) || Array.prototype.some.call(msgs.querySelectorAll('.row.user'), (r) => r.cid && r.cid === frame.client_message_id);
      if (!known) {
        addRow('user', frame.message_id, frame, byId(frame.reply_id));
        if (wasBottom) toBottom();
      }
      emit('message:received', frame);
      return;
    }
    var row = byId(frame.reply_id);
    var isNew = !row;
    if (frame.type === 'reply_delta') {
      row = liveRow(frame.reply_id);
      // A delta for a reply already shown in full (a replay) is stale.
      if (row && row.b.classList.contains('live')) {
        row.b.classList.remove('typing');
        // `reset`: the turn runs again after its stream was cut off; the partial answer is dropped, not extended.
        fill(row, { text: (frame.reset ? '' : row.text || '') + (frame.text || '') });
        settle(row, wasBottom, isNew);
      }
    } else if (frame.type === 'reply') {
      // Authoritative: replaces the live bubble (or a copy shown before a reconnect).
      var shown = row && !row.b.classList.contains('live');
      row = row || addRow('assistant', frame.reply_id, frame);
      row.b.classList.remove('live', 'typing');
      row.b.removeAttribute('aria-busy');
      row.b.title = stamp();
      fill(row, frame);
      if (!msgs.querySelector('.live')) typing.textContent = '';
      if (frame.suggested_actions) setChips(frame.suggested_actions);
      // Announced once, the final text only (the log itself is not a live region: deltas are silent).
      if (!shown && frame.text) say.textContent = (frame.author === 'human' ? 'Support team' : agentName) + ': ' + plain(frame.text);
      // Closed: the launcher shows a dot and says there is something new.
      if (!shown && !isOpen) {
        launcher.classList.add('unread');
        launcher.setAttribute('aria-label', 'Open chat (new message)');
      }
      settle(row, wasBottom, isNew);
    } else if (frame.type === 'suggested_actions') {
      setChips(frame.suggested_actions);
    } else if (frame.type === 'error') {
      failed[frame.reply_id] = frame.code || 'workflow_execution_failed';
      if (row && row.b.classList.contains('live')) row.remove();
      if (!msgs.querySelector('.live')) typing.textContent = '';
      // The message it answers gets the news (now, or when its 202 comes back after this frame).
      if (pending[frame.reply_id]) turnFailed(pending[frame.reply_id], failed[frame.reply_id]);
    } else if (frame.type === 'task_status') {
      conn.textContent = frame.status === 'running' ? frame.label + '\u2026' : '';
      conn.hidden = frame.status !== 'running';
    } else if (frame.type === 'ui:command') {
      emit('ui:command', { command: frame.command, args: frame.args });
    }
    emit('message:received', frame);
  }

  /**
   * The turn failed: the message says so, and Retry sends the same message again (its client_message_id kept): the
   * server runs the turn again on the message it stored, so the question is stored once and answered once.
   */
  function turnFailed(row, code) {
    note(row, ERRORS[code] || ERRORS.workflow_execution_failed, true, () => {
      void send(row.text, row);
    });
  }

  // ---- Conversation
  function addHistory(page, older) {
    var first = older ? msgs.firstChild : null;
    var fromBottom = log.scrollHeight - log.scrollTop;
    page.messages.forEach((m) => {
      if (!byId(m.id)) addRow(m.role, m.id, m, first);
    });
    if (older) log.scrollTop = log.scrollHeight - fromBottom;
    nextBefore = page.has_more ? page.next_before : null;
    more.hidden = !nextBefore;
  }
  function loadHistory(before) {
    var q = 'history?conversation_id=' + encodeURIComponent(session.conversation_id) + '&limit=50';
    if (before) q += '&before=' + encodeURIComponent(before);
    return api('GET', q).then((page) => { addHistory(page, Boolean(before)); });
  }
  more.addEventListener('click', () => {
    if (nextBefore) loadHistory(nextBefore).catch((e) => { showError(friendly(e)); });
  });

  function postWithRetry(body, attempt) {
    // Network failures, 429 and 5xx are retried with the same client_message_id: one message, however many tries.
    return api('POST', 'send', body).catch((e) => {
      var transient = (!e.status && navigator.onLine !== false) || e.status === 429 || e.status >= 500;
      if (!transient || attempt >= 2) throw e;
      return new Promise((r) => { setTimeout(r, 1000 * Math.pow(2, attempt)); }).then(() => postWithRetry(body, attempt + 1));
    });
  }

  /** Sends a visitor message; `row` is a failed message being retried (its client_message_id is kept). */
  function send(text, row) {
    text = String(text || '').trim();
    if (!text || !session) return Promise.resolve(null);
    showError('');
    setChips(null);
    if (!row) {
      row = addRow('user', null, { text: text });
      row.cid = uuid();
    }
    row.classList.remove('failed');
    note(row, 'Sending\u2026');
    toBottom();
    var body = { conversation_id: session.conversation_id, customer_id: session.customer_id, text: text, client_message_id: row.cid, delivery: 'async' };
    // The reply is pushed on the socket, which must be open before the send.
    if (!sock) connect();
    var ready = Promise.race([sockOpen, new Promise((r) => { setTimeout(r, 5000); })]);
    return ready
      .then(() => postWithRetry(body, 0))
      .then((res) => {
        note(row, null);
        row.b.setAttribute('data-id', res.message_id);
        pending[res.reply_id] = row;
        if (failed[res.reply_id]) turnFailed(row, failed[res.reply_id]);
        // The reply may have started streaming before the 202 came back.
        var live = liveRow(res.reply_id);
        if (live && live.b.classList.contains('live')) msgs.appendChild(live);
        toBottom();
        emit('message:sent', { message_id: res.message_id, reply_id: res.reply_id, text: text });
        return res;
      })
      .catch((e) => {
        row.classList.add('failed');
        note(row, friendly(e), true, () => { void send(text, row); input.focus(); });
        emit('error', { error: e.code || 'offline', message: e.message });
        return null;
      });
  }

  function syncInput() {
    sendBtn.disabled = !session || !input.value.trim();
    // Grows with its text up to the CSS max-height, then scrolls.
    input.style.height = '';
    if (input.scrollHeight > input.clientHeight) input.style.height = input.scrollHeight + 2 + 'px';
  }
  input.addEventListener('input', syncInput);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    var text = input.value;
    if (!text.trim() || !session) return;
    input.value = '';
    syncInput();
    void send(text);
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });

  // ---- Voice call, when the agent offers it. The browser's own WebRTC peer talks to the
  // agent directly (transport 'direct': our signalling socket) or through a LiveKit room;
  // transcript frames arrive on the data channel / topic 'transcript'.
  var micBtn = $('.mic');
  var vc = $('.vc');
  var vLog = $('.vt');
  var vEnd = $('.vend');
  var audioEl = h('audio', { autoplay: '' });
  root.append(audioEl);
  var voice = null; // the call in progress: { id, info, stream, ws, pc, room, turns, over }
  var MIC = 'Allow the microphone to talk with the assistant, then try again.';
  var CANT = 'The call could not connect. Please try again.';

  function voiceUi(state) {
    micBtn.setAttribute('aria-pressed', String(state !== 'ended'));
    vc.setAttribute('data-state', state);
    $('.vs').textContent = state === 'live' ? 'On call with ' + agentName : state === 'ended' ? 'Call ended' : 'Connecting the call\u2026';
    vEnd.textContent = state === 'ended' ? 'Close transcript' : 'End call';
    // Nothing said: nothing to keep on screen once the call is over.
    vc.hidden = state === 'ended' && !vLog.firstChild;
  }

  /** One line per turn and speaker: partial frames rewrite it in place, the final one fixes it. */
  function onTranscript(v, data) {
    var f;
    try { f = JSON.parse(data); } catch (e) { return; }
    if (!f || f.type !== 'transcript' || v !== voice) return;
    var who = f.speaker === 'user' ? 'user' : 'assistant';
    var stick = vLog.scrollHeight - vLog.scrollTop - vLog.clientHeight < 30;
    var line = v.turns[who];
    if (!line) vLog.append((line = v.turns[who] = h('p', { class: who }, [h('b', {}, [(who === 'user' ? 'You' : agentName) + ':']), h('span')])));
    line.lastChild.textContent = String(f.text || '');
    line.classList.toggle('partial', Boolean(f.partial));
    if (!f.partial) v.turns[who] = null;
    if (stick) vLog.scrollTop = vLog.scrollHeight;
    emit('voice:transcript', f);
  }

  function callError(code, message) {
    var e = new Error(message || CANT);
    e.code = code;
    e.call = true;
    return e;
  }

  /** Non-trickle: the offer goes once ICE gathering is complete (or after 3 s, with what there is). */
  var gathered = (pc) => new Promise((done) => {
    if (pc.iceGatheringState === 'complete') done();
    pc.addEventListener('icegatheringstatechange', () => { if (pc.iceGatheringState === 'complete') done(); });
    setTimeout(done, 3000);
  });

  /** transport 'direct': join → joined (ICE servers) → offer → answer on our signalling socket; resolves when connected. */
  function viaDirect(v, res) {
    return new Promise((resolve, reject) => {
      var ws = (v.ws = new WebSocket(res.rtc_url));
      ws.onopen = () => { ws.send(JSON.stringify({ type: 'join', token: res.rtc_token })); };
      ws.onclose = () => { reject(callError('signalling_closed')); };
      ws.onmessage = (ev) => {
        var m;
        try { m = JSON.parse(ev.data); } catch (e) { return; }
        if (m.type === 'joined') {
          var pc = (v.pc = new RTCPeerConnection({ iceServers: m.ice_servers || [] }));
          pc.ontrack = (e) => { audioEl.srcObject = e.streams[0] || new MediaStream([e.track]); };
          pc.onconnectionstatechange = () => {
            if (pc.connectionState === 'connected') resolve();
            else if (/failed|closed/.test(pc.connectionState)) {
              reject(callError('connection_failed'));
              voiceEnd(v, 'connection_failed', 'The call was cut off. Please try again.');
            }
          };
          pc.createDataChannel('transcript').onmessage = (e) => { onTranscript(v, typeof e.data === 'string' ? e.data : new TextDecoder().decode(e.data)); };
          v.stream.getAudioTracks().forEach((t) => { pc.addTrack(t, v.stream); });
          pc.createOffer()
            .then((o) => pc.setLocalDescription(o))
            .then(() => gathered(pc))
            .then(() => { ws.send(JSON.stringify({ type: 'offer', sdp: pc.localDescription.sdp })); })
            .catch(reject);
        } else if (m.type === 'answer' && v.pc) {
          v.pc.setRemoteDescription({ type: 'answer', sdp: m.sdp }).catch(reject);
        } else if (m.type === 'error') {
          reject(callError(m.error, m.message));
        } else if (m.type === 'ended') {
          voiceEnd(v, m.reason || 'ended');
        }
      };
    });
  }

  /** transport 'livekit': the LiveKit browser SDK, fetched from this host only when a call needs it. */
  function viaLivekit(v, res) {
    return new Promise((ok, no) => {
      if (window.LivekitClient) return ok();
      document.head.append(h('script', { src: apiBase + '/widget/livekit-client.js', onload: ok, onerror: () => { no(callError('livekit_unavailable')); } }));
    }).then(() => {
      var L = window.LivekitClient;
      var room = (v.room = new L.Room());
      room.on(L.RoomEvent.TrackSubscribed, (track) => { if (track.kind === 'audio') track.attach(audioEl); });
      room.on(L.RoomEvent.DataReceived, (payload, p, kind, topic) => { if (topic === 'transcript') onTranscript(v, new TextDecoder().decode(payload)); });
      return room.connect(res.rtc_url, res.rtc_token).then(() => {
        // Only once joined: a failed join rejects connect() (and says why) after its own Disconnected.
        room.on(L.RoomEvent.Disconnected, () => { voiceEnd(v, 'disconnected', 'The call was cut off. Please try again.'); });
        return room.localParticipant.publishTrack(v.stream.getAudioTracks()[0], { source: L.Track.Source.Microphone });
      });
    });
  }

  /** Starts a call: the microphone first (a refusal costs no voice session), then /voice/start, then the transport. */
  function voiceStart() {
    if (voice || !session) return Promise.resolve(null);
    var v = (voice = { turns: {} });
    showError('');
    vLog.textContent = '';
    voiceUi('connecting');
    var check = () => { if (v.over) throw null; };
    return navigator.mediaDevices.getUserMedia({ audio: true })
      .then((stream) => {
        v.stream = stream;
        check();
        return api('POST', 'voice/start', { conversation_id: session.conversation_id });
      })
      .then((res) => {
        v.id = res.voice_session_id;
        v.info = { voice_session_id: v.id, room_name: res.room_name, transport: res.transport, voice_mode: res.voice_mode, voice_animation_style: res.voice_animation_style };
        check();
        return res.transport === 'livekit' ? viaLivekit(v, res) : viaDirect(v, res);
      })
      .then(() => {
        check();
        voiceUi('live');
        emit('voice:state', Object.assign({ state: 'live' }, v.info));
        return v.info;
      })
      .catch((e) => {
        var msg = e && (/NotAllowed|NotFound/.test(e.name) ? MIC : e.code === 'out_of_credits' ? NO_CALLS : e.status || e.call ? e.message : navigator.onLine === false ? ERRORS.offline : CANT);
        if (e && !v.over) emit('error', { error: e.code || e.name, message: msg });
        voiceEnd(v, e ? e.code || e.name : v.over, msg);
        return null;
      });
  }

  /** Ends a call (idempotent): tears the media down at once, then tells the server (/voice/stop). */
  function voiceEnd(v, reason, message) {
    var first = !v.over;
    v.over = v.over || reason || 'ended';
    // Run again for what a late step of the start may have created after the end.
    if (v.ws && v.ws.readyState === 1) v.ws.send('{"type":"bye"}');
    if (v.ws) v.ws.close();
    if (v.pc) v.pc.close();
    if (v.room) v.room.disconnect();
    if (v.stream) v.stream.getTracks().forEach((t) => { t.stop(); });
    if (v.id && !v.stopped) v.stopped = api('POST', 'voice/stop', { voice_session_id: v.id }).catch(() => null);
    if (first) {
      if (voice === v) {
        voice = null;
        audioEl.srcObject = null;
        voiceUi('ended');
        if (message) showError(message);
      }
      emit('voice:state', Object.assign({ state: 'ended', reason: v.over }, v.info));
    }
    return v.stopped || Promise.resolve(null);
  }

  micBtn.addEventListener('click', () => { void (voice ? voiceEnd(voice, 'visitor') : voiceStart()); });
  vEnd.addEventListener('click', () => {
    if (voice) void voiceEnd(voice, 'visitor');
    else vc.hidden = true;
    if (vc.hidden) micBtn.focus();
  });

  function greet() {
    var a = session.agent || {};
    var text = attr('greeting') || a.greeting || 'Hi there! How can I help you today?';
    var row = addRow('assistant', null, { text: text, greeting: true });
    row.classList.add('greeting');
    // Above the "Earlier messages" button: it opens the conversation, however far back it goes.
    log.insertBefore(row, more);
    var starters = attr('starters') ? attr('starters').split('|') : a.starters || [];
    starters = starters.map((q) => q.trim()).filter(Boolean).slice(0, 5);
    if (!msgs.querySelector('.msg') && starters.length) setChips(starters);
  }

  function start() {
    var saved = store.get(convKey);
    api('POST', 'init', saved ? { conversation_id: saved } : {})
      .then((res) => {
        session = res;
        store.set(convKey, res.conversation_id);
        agentName = (res.agent && res.agent.name) || agentName;
        $('.title').textContent = agentName;
        $('.av').textContent = agentName.charAt(0).toUpperCase();
        panel.setAttribute('aria-label', 'Chat with ' + agentName);
        host.hidden = false;
        micBtn.hidden = !(res.capabilities && res.capabilities.voice_chat);
        return loadHistory(null);
      })
      .then(() => {
        greet();
        connect();
        syncInput();
        var open = store.get(openKey);
        setOpen(open ? open === '1' : script.hasAttribute('data-open') && attr('open') !== 'false', false);
        toBottom();
        host.setAttribute('data-state', 'ready');
        emit('ready', { conversation_id: session.conversation_id, customer_id: session.customer_id, agent: session.agent });
      })
      .catch((e) => {
        emit('error', { error: e.code || 'offline', message: e.message });
        if (e.status === 404 || e.status === 403) {
          // An unknown, suspended or misconfigured site: nothing to show the visitor; the site owner reads why here.
          host.remove();
          console.error('Concierge widget hidden: ' + e.message + ' (' + e.code + ')');
          return;
        }
        host.hidden = false;
        showError(friendly(e));
      });
  }

  window.ConciergeWidget = {
    /**
     * Subscribes to 'ready', 'open', 'close', 'message:received' (every pushed frame but pings), 'message:sent', 'ui:command', 'error',
     * 'voice:state' ({state: 'live' | 'ended', voice_session_id, room_name, transport, reason}) and 'voice:transcript' (each transcript frame);
     * returns an unsubscribe function.
     */
    on: (event, fn) => {
      (handlers[event] = handlers[event] || []).push(fn);
      return () => { handlers[event] = (handlers[event] || []).filter((f) => f !== fn); };
    },
    send: send,
    open: () => { setOpen(true, true); },
    close: () => { setOpen(false, false); },
    get conversationId() { return session ? session.conversation_id : null; },
    /** The voice call: start() resolves with the session (or null on failure), stop() with /voice/stop's answer, injectText(text) says text into the live call. */
    voice: {
      start: voiceStart,
      stop: () => (voice ? voiceEnd(voice, 'visitor') : Promise.resolve(null)),
      injectText: (text) => (voice && voice.id ? api('POST', 'voice/inject_text', { voice_session_id: voice.id, text: String(text) }) : Promise.reject(new Error('No voice call in progress'))),
      get session() { return voice && voice.info ? Object.assign({ state: vc.getAttribute('data-state') }, voice.info) : null; },
    },
  };

  if (!siteId) {
    console.error('Concierge widget: the script tag needs data-site-id');
    return;
  }
  function mount() {
    document.body.appendChild(host);
    start();
  }
  if (document.body) mount();
  else document.addEventListener('DOMContentLoaded', mount);
})();
