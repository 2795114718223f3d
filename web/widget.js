/*
 * Concierge chat widget. Plain browser JavaScript, no build step. Uses only the public
 * widget API (/api/public/widget/*, header X-Concierge-Site) and the receive-only reply
 * socket /api/chat/connect.
 *
 *   <script src="https://HOST/widget.js" data-site-id="site_..." async></script>
 *
 * Optional attributes: data-api-base (default: this script's origin), data-silence-ms
 * (reconnect the socket after this long without any frame; default 75000), data-collapsed.
 */
(() => {
  'use strict';
  var script = document.currentScript;
  if (!script || window.ConciergeWidget) return;
  var siteId = script.getAttribute('data-site-id');
  var apiBase = (script.getAttribute('data-api-base') || new URL(script.src, location.href).origin).replace(/\/+$/, '');
  // The server pings every 30 s; about 75 s of silence means the connection is dead.
  var silenceMs = Number(script.getAttribute('data-silence-ms')) || 75000;
  var storeKey = 'concierge:conversation:' + siteId;

  var handlers = {};
  function emit(event, detail) {
    (handlers[event] || []).slice().forEach((fn) => {
      try { fn(detail); } catch (e) { setTimeout(() => { throw e; }); }
    });
  }

  var session = null; // init response
  var sock = null;
  var sockOpen = null; // resolves when the current socket is open
  var silenceTimer = 0;
  var retryTimer = 0;
  var retryDelay = 1000;
  var nextBefore = null;
  var failed = {}; // reply ids that ended in an error frame

  // ---- DOM (shadow root: host page CSS does not leak in, ours does not leak out)
  var host = document.createElement('div');
  host.setAttribute('data-concierge-widget', '');
  var root = host.attachShadow({ mode: 'open' });
  root.innerHTML =
    '<style>' +
    ':host{all:initial}' +
    '.panel{position:fixed;right:16px;bottom:16px;z-index:2147483000;width:340px;max-width:calc(100vw - 32px);display:flex;flex-direction:column;' +
    '--c:#243b6b;font:14px/1.4 system-ui,sans-serif;color:#1b1b1f;background:#fff;border:1px solid #d0d0d7;border-radius:12px;box-shadow:0 6px 24px rgba(0,0,0,.15);overflow:hidden}' +
    'header{display:flex;align-items:center;justify-content:space-between;padding:10px 12px;background:var(--c);color:#fff;font-weight:600}' +
    'header button{background:none;border:0;color:inherit;font:inherit;cursor:pointer;padding:0 4px}' +
    '.body{display:flex;flex-direction:column;height:420px;max-height:70vh}' +
    '.panel.collapsed .body{display:none}' +
    '.log{flex:1;overflow-y:auto;padding:10px;display:flex;flex-direction:column;gap:6px}' +
    '.msg{max-width:85%;padding:7px 10px;border-radius:10px;white-space:pre-wrap;word-wrap:break-word}' +
    '.user{align-self:flex-end;background:var(--c);color:#fff}' +
    '.assistant{align-self:flex-start;background:#eef0f5}' +
    '.msg.failed{opacity:.6;outline:1px dashed #b00020}' +
    '.msg a{color:inherit;display:block}' +
    '.typing:empty::after{content:"\\2022\\2022\\2022";letter-spacing:2px;opacity:.6}' +
    '.more{align-self:center;font:inherit;font-size:12px;background:none;border:0;color:var(--c);cursor:pointer;text-decoration:underline}' +
    '.err{margin:0 10px 6px;padding:6px 8px;border-radius:6px;background:#fdecee;color:#8a0016;font-size:13px}' +
    '.status{margin:0 10px 6px;font-size:12px;color:#555}' +
    '.chips{display:flex;flex-wrap:wrap;gap:6px;padding:0 10px 6px}' +
    '.chips button{font:inherit;font-size:13px;border:1px solid var(--c);color:var(--c);background:#fff;border-radius:14px;padding:3px 10px;cursor:pointer}' +
    'form{display:flex;gap:6px;padding:8px;border-top:1px solid #e3e3ea}' +
    'textarea{flex:1;resize:none;font:inherit;padding:6px 8px;border:1px solid #c5c5cf;border-radius:8px;min-height:20px;max-height:100px}' +
    'form button{font:inherit;border:0;border-radius:8px;padding:0 14px;background:var(--c);color:#fff;cursor:pointer}' +
    'form button:disabled{opacity:.5;cursor:default}' +
    '[hidden]{display:none!important}' +
    '</style>' +
    '<section class="panel" role="region" aria-label="Chat">' +
    '<header><span class="title">Chat</span><button type="button" class="toggle" aria-expanded="true" aria-label="Minimise chat">&#8211;</button></header>' +
    '<div class="body">' +
    '<div class="log" role="log" aria-live="polite" aria-relevant="additions text" aria-label="Conversation"><button type="button" class="more" hidden>Earlier messages</button></div>' +
    '<div class="status" role="status" hidden></div>' +
    '<div class="chips" hidden></div>' +
    '<div class="err" role="alert" hidden></div>' +
    '<form><textarea rows="1" aria-label="Message" placeholder="Type a message" maxlength="10000"></textarea><button type="submit" disabled>Send</button></form>' +
    '</div></section>';
  var $ = (sel) => root.querySelector(sel);
  var panel = $('.panel');
  var log = $('.log');
  var more = $('.more');
  var statusEl = $('.status');
  var chips = $('.chips');
  var errEl = $('.err');
  var input = $('textarea');
  var sendBtn = $('form button');
  var toggle = $('.toggle');

  function setCollapsed(collapsed) {
    panel.classList.toggle('collapsed', collapsed);
    toggle.setAttribute('aria-expanded', String(!collapsed));
    toggle.setAttribute('aria-label', collapsed ? 'Open chat' : 'Minimise chat');
    toggle.innerHTML = collapsed ? '&#43;' : '&#8211;';
  }
  toggle.addEventListener('click', () => { setCollapsed(!panel.classList.contains('collapsed')); });
  if (script.hasAttribute('data-collapsed')) setCollapsed(true);

  function showError(message) {
    errEl.textContent = message || '';
    errEl.hidden = !message;
  }

  function byId(id) {
    return id ? log.querySelector('[data-id="' + CSS.escape(id) + '"]') : null;
  }

  function fill(el, text, attachments) {
    el.textContent = text || '';
    (attachments || []).forEach((a) => {
      var url = a && (a.file_url || a.url);
      if (typeof url !== 'string' || !/^https?:/i.test(url)) return; // never javascript: links
      var link = document.createElement('a');
      link.href = url;
      link.target = '_blank';
      link.rel = 'noopener noreferrer';
      link.textContent = a.file_name || a.name || 'Attachment';
      el.appendChild(link);
    });
  }

  function bubble(role, id, text, attachments, before) {
    var el = document.createElement('div');
    el.className = 'msg ' + (role === 'user' ? 'user' : 'assistant');
    if (id) el.setAttribute('data-id', id);
    fill(el, text, attachments);
    log.insertBefore(el, before || null);
    return el;
  }

  function scrollDown() { log.scrollTop = log.scrollHeight; }

  // The id of the newest message shown: what a reconnecting socket asks to be replayed after.
  function lastShownId() {
    var all = log.querySelectorAll('.msg[data-id]:not(.live)');
    return all.length ? all[all.length - 1].getAttribute('data-id') : null;
  }

  function liveBubble(replyId) {
    var el = byId(replyId);
    if (!el && !failed[replyId]) {
      el = bubble('assistant', replyId, '');
      el.classList.add('live', 'typing');
      el.setAttribute('aria-busy', 'true');
    }
    return el;
  }

  function setChips(actions) {
    chips.textContent = '';
    (actions || []).forEach((label) => {
      var b = document.createElement('button');
      b.type = 'button';
      b.textContent = label;
      b.addEventListener('click', () => { void send(label); });
      chips.appendChild(b);
    });
    chips.hidden = !chips.childNodes.length;
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
      sock = null;
      clearTimeout(silenceTimer);
      opened();
      retryTimer = setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 30000);
    };
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

  function onFrame(frame) {
    if (!frame || typeof frame.type !== 'string') return;
    if (frame.type === 'ping') return;
    var el;
    if (frame.type === 'reply_delta') {
      el = liveBubble(frame.reply_id);
      // A delta for a reply already shown in full (a replay) is stale.
      if (el && el.classList.contains('live')) {
        el.classList.remove('typing');
        el.textContent += frame.text || '';
      }
    } else if (frame.type === 'reply') {
      // Authoritative: replaces the live bubble (or a copy shown before a reconnect).
      el = byId(frame.reply_id) || bubble('assistant', frame.reply_id, '');
      el.classList.remove('live', 'typing');
      el.removeAttribute('aria-busy');
      fill(el, frame.text, frame.attachments);
      if (frame.suggested_actions) setChips(frame.suggested_actions);
    } else if (frame.type === 'suggested_actions') {
      setChips(frame.suggested_actions);
    } else if (frame.type === 'error') {
      failed[frame.reply_id] = true;
      el = byId(frame.reply_id);
      if (el && el.classList.contains('live')) el.remove();
      showError(frame.text || 'The assistant could not answer. Please try again.');
    } else if (frame.type === 'task_status') {
      statusEl.textContent = frame.status === 'running' ? frame.label + '\u2026' : '';
      statusEl.hidden = frame.status !== 'running';
    }
    scrollDown();
    emit('message:received', frame);
  }

  // ---- Conversation
  function addHistory(page, atTop) {
    var first = atTop ? more.nextSibling : null;
    page.messages.forEach((m) => {
      if (!byId(m.id)) bubble(m.role, m.id, m.text, m.attachments, first);
    });
    nextBefore = page.has_more ? page.next_before : null;
    more.hidden = !nextBefore;
  }

  function loadHistory(before) {
    var q = 'history?conversation_id=' + encodeURIComponent(session.conversation_id) + '&limit=50';
    if (before) q += '&before=' + encodeURIComponent(before);
    return api('GET', q).then((page) => { addHistory(page, Boolean(before)); });
  }
  more.addEventListener('click', () => {
    if (nextBefore) loadHistory(nextBefore).catch((e) => { showError(e.message); });
  });

  function postWithRetry(body, attempt) {
    // Network failures, 429 and 5xx are retried with the same client_message_id: one message, however many tries.
    return api('POST', 'send', body).catch((e) => {
      var transient = !e.status || e.status === 429 || e.status >= 500;
      if (!transient || attempt >= 3) throw e;
      return new Promise((r) => { setTimeout(r, 1000 * Math.pow(2, attempt)); }).then(() => postWithRetry(body, attempt + 1));
    });
  }

  function send(text) {
    text = String(text || '').trim();
    if (!text || !session) return Promise.resolve(null);
    showError('');
    setChips(null);
    var mine = bubble('user', null, text);
    mine.setAttribute('aria-busy', 'true');
    scrollDown();
    var body = { conversation_id: session.conversation_id, customer_id: session.customer_id, text: text, client_message_id: uuid(), delivery: 'async' };
    // The reply is pushed on the socket, which must be open before the send.
    if (!sock) connect();
    var ready = Promise.race([sockOpen, new Promise((r) => { setTimeout(r, 5000); })]);
    return ready
      .then(() => postWithRetry(body, 0))
      .then((res) => {
        mine.removeAttribute('aria-busy');
        mine.setAttribute('data-id', res.message_id);
        // The reply may have started streaming before the 202 came back.
        var live = liveBubble(res.reply_id);
        if (live && live.classList.contains('live')) log.appendChild(live);
        scrollDown();
        emit('message:sent', { message_id: res.message_id, reply_id: res.reply_id, text: text });
        return res;
      })
      .catch((e) => {
        mine.removeAttribute('aria-busy');
        mine.classList.add('failed');
        mine.setAttribute('title', 'Not sent');
        showError(e.message);
        emit('error', { error: e.code, message: e.message });
        return null;
      });
  }

  var form = $('form');
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    var text = input.value;
    if (!text.trim()) return;
    input.value = '';
    void send(text);
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });

  function start() {
    var saved = null;
    try { saved = localStorage.getItem(storeKey); } catch (e) { /* storage blocked */ }
    api('POST', 'init', saved ? { conversation_id: saved } : {})
      .then((res) => {
        session = res;
        try { localStorage.setItem(storeKey, res.conversation_id); } catch (e) { /* storage blocked */ }
        $('.title').textContent = res.agent.name;
        return loadHistory(null);
      })
      .then(() => {
        scrollDown();
        connect();
        sendBtn.disabled = false;
        emit('ready', { conversation_id: session.conversation_id, customer_id: session.customer_id, agent: session.agent });
      })
      .catch((e) => {
        showError(e.message);
        emit('error', { error: e.code, message: e.message });
      });
  }

  window.ConciergeWidget = {
    /** Subscribes to 'ready', 'message:received' (every pushed frame but pings), 'message:sent', 'error'; returns an unsubscribe function. */
    on: (event, fn) => {
      (handlers[event] = handlers[event] || []).push(fn);
      return () => { handlers[event] = (handlers[event] || []).filter((f) => f !== fn); };
    },
    send: send,
    get conversationId() { return session ? session.conversation_id : null; },
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
