/* sale.js - the buyer's page of one sale (docs/buyer-page.md).
 *
 * What it promises the servers: no purchase request before the start (the
 * countdown runs on the server's clock, learned from GET /api/v1/time);
 * the waiting room polled exactly at the server's poll_after_ms plus up to
 * a tenth of jitter, never sooner; one click, one purchase request with an
 * Idempotency-Key, and retries (after a 503, a 429 or a network error,
 * honouring Retry-After) with the same key; the order polled with back-off;
 * sold out learned from the cheap live read at the pace it suggests, never
 * from the purchase route. Texts: zh and en (sk-brand may replace any). */
(function () {
  'use strict';

  /* Each text in both languages, side by side: [zh, en] (LANGS). */
  var LANGS = ['zh', 'en'];
  var T = {
    lang_switch: ['English', '中文'],
    lang_name: ['中文', 'English'],
    loading: ['加载中…', 'Loading…'],
    stock: ['剩余 {n} / {total} 件', '{n} of {total} left'],
    limit: ['每人限购 {n} 件', 'limit {n} per buyer'],
    starts: ['开始时间 {t}', 'Starts {t}'],
    ends: ['结束时间 {t}', 'Ends {t}'],
    closed: ['活动尚未开放', 'The sale is not open yet'],
    closed_d: ['开放后此页会自动更新。', 'This page updates itself when it opens.'],
    countdown: ['距开始还有', 'Starts in'],
    countdown_d: ['按钮将在开始时自动亮起。', 'The button lights up at the start.'],
    open: ['正在抢购', 'On sale now'],
    open_d: ['每次点击只提交一次，不会重复下单。', 'One click sends one order, never two.'],
    buy: ['立即抢购', 'Buy now'],
    buy_wait: ['即将开始', 'Starting soon'],
    buy_sending: ['提交中…', 'Sending…'],
    buy_again: ['重试', 'Try again'],
    buy_queue: ['排队中…', 'Waiting for your turn…'],
    queue_before: ['已排队，开始时随机抽签排位', 'You are in line; places are drawn at the start'],
    queue_before_d: ['提前到达不会更靠前；请保持此页打开。', 'Arriving early does not put you ahead. Keep this page open.'],
    queue_wait: ['排队中', 'You are in line'],
    queue_wait_d: ['页面会按服务器给出的间隔自动刷新，请勿频繁刷新。', 'This page refreshes itself at the pace the server asks; no need to reload.'],
    q_pos: ['前方位置', 'Position'],
    q_eta: ['预计等待', 'Wait'],
    q_place: ['排位号', 'Place'],
    join_again: ['重新排队', 'Join the line again'],
    admitted: ['轮到你了！', 'It is your turn!'],
    admitted_d: ['请在 {t} 前下单。', 'Buy before {t}.'],
    pass_expired: ['你的通行证已过期', 'Your pass has expired'],
    pass_expired_d: ['可重新排队，但会排到队尾。', 'You may join again, at the back of the line.'],
    pass_used: ['你的通行证已用于下单', 'Your pass was used for an order'],
    accepted: ['抢到了！', 'You got one!'],
    processing: ['订单处理中', 'Your order is being processed'],
    processing_d: ['几秒后自动刷新，请勿重复提交。', 'This page refreshes in a few seconds; do not order again.'],
    created: ['订单已创建，请尽快付款', 'Order created: please pay'],
    created_d: ['付款剩余时间', 'Time left to pay'],
    pay: ['去付款', 'Pay now'],
    cancel: ['取消订单', 'Cancel order'],
    paying: ['付款中…', 'Paying…'],
    cancelling: ['取消中…', 'Cancelling…'],
    paid: ['已付款，感谢购买！', 'Paid. Thank you!'],
    cancelled: ['订单已取消', 'Order cancelled'],
    cancelled_d: ['库存已退回。', 'The item went back on sale.'],
    pay_over: ['付款时间已过', 'The time to pay is over'],
    pay_over_d: ['未付款的订单将被取消，库存退回。', 'An unpaid order is cancelled and its item goes back on sale.'],
    order_id: ['订单号 {id}', 'Order {id}'],
    sold_out: ['已售罄', 'Sold out'],
    sold_out_d: ['未付款订单超时后可能有库存退回，此页会自动更新。', 'Unpaid orders may give items back; this page updates itself.'],
    limit_exceeded: ['已达购买上限', 'You have reached the limit'],
    limit_exceeded_d: ['每人限购 {n} 件。', 'At most {n} per buyer.'],
    not_started: ['活动尚未开始', 'The sale has not started yet'],
    ended: ['活动已结束', 'The sale has ended'],
    unknown: ['没有这个活动', 'No such sale'],
    no_pass: ['需要排队通行证', 'You need a pass from the line'],
    no_pass_d: ['请先排队，轮到你后再下单。', 'Join the line; buy when it is your turn.'],
    unauthorized: ['请先登录', 'Please sign in first'],
    bad_request: ['请求有误：{m}', 'The request was refused: {m}'],
    rate_limited: ['请求太频繁', 'Too many requests'],
    recovering: ['系统恢复中', 'The sale is recovering'],
    unavailable: ['服务繁忙', 'The service is busy'],
    network: ['网络连接中断', 'Connection lost'],
    retry_d: ['{s} 秒后自动重试，使用同一请求，不会重复下单。', 'Trying again in {s} s with the same request: you will not buy twice.'],
    gave_up: ['暂时无法提交', 'Could not send your order'],
    gave_up_d: ['可再次点击重试，不会重复下单。', 'Click to try again; you will not buy twice.'],
    error: ['出错了：{m}', 'Something went wrong: {m}'],
    dur_d: ['{d} 天 ', '{d} d '],
    unit_s: ['{n} 秒', '{n} s'],
    unit_m: ['{n} 分钟', '{n} min'],
    unit_h: ['{n} 小时', '{n} h']
  };

  /* ---- set-up ---------------------------------------------------------- */

  function $(id) { return document.getElementById(id); }
  function readJSON(id) {
    try { return JSON.parse(($(id) || {}).textContent || '{}') || {}; } catch (e) { return {}; }
  }
  var brand = readJSON('sk-brand'), conf = readJSON('sk-config');
  var qs = new URLSearchParams(location.search), frag = new URLSearchParams(location.hash.slice(1));
  var aid = String(conf.activity || (location.pathname.match(/\/sale\/(\d+)/) || [])[1] || qs.get('id') || '');
  var api = String(conf.api_base || '').replace(/\/+$/, '');
  var store = {
    get: function (k) { try { return JSON.parse(localStorage.getItem(k)); } catch (e) { return null; } },
    set: function (k, v) { try { localStorage.setItem(k, JSON.stringify(v)); } catch (e) { /* private mode */ } },
    del: function (k) { try { localStorage.removeItem(k); } catch (e) { /* private mode */ } }
  };
  /* Who buys: a gateway in front sets it (cookies); ?user=N (X-User-Id, to try
   * the page without one) or #token=T (a bearer token) when there is none. */
  var user = qs.get('user') || '';
  var token = frag.get('token') || sessionStorage.getItem('sk:token') || '';
  if (frag.get('token')) { try { sessionStorage.setItem('sk:token', token); } catch (e) { /* */ } }
  var key = 'sk:' + aid + ':' + (user || (token ? token.split('.')[0] : 'me'));

  function pickLang() {
    var l = qs.get('lang') || store.get('sk:lang');
    if (l === 'zh' || l === 'en') return l;
    var ls = navigator.languages || [navigator.language || ''];
    for (var i = 0; i < ls.length; i++) {
      if (/^zh/i.test(ls[i])) return 'zh';
      if (/^en/i.test(ls[i])) return 'en';
    }
    return 'en';
  }
  var lang = pickLang();

  /* The page's own text k in the page's language; undefined when it has none. */
  function builtin(k) {
    return Object.prototype.hasOwnProperty.call(T, k) ? T[k][LANGS.indexOf(lang)] : undefined;
  }
  function t(k, vars) {
    var bt = brand.texts && brand.texts[lang];
    var s = (bt && bt[k] != null) ? String(bt[k]) : (builtin(k) != null ? builtin(k) : k);
    return s.replace(/\{(\w+)\}/g, function (_, v) { return vars && vars[v] != null ? vars[v] : ''; });
  }
  function num(n) { return new Intl.NumberFormat(lang === 'zh' ? 'zh-CN' : 'en').format(n); }
  function time(ms) {
    return new Intl.DateTimeFormat(lang === 'zh' ? 'zh-CN' : 'en', {
      month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit'
    }).format(new Date(ms));
  }
  function pad(n) { return n < 10 ? '0' + n : String(n); }
  /* A countdown: "1 d 02:03:04", "02:03:04" or "03:04". */
  function clockText(ms) {
    var s = Math.max(0, Math.ceil(ms / 1000)), d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24;
    var m = Math.floor(s / 60) % 60, x = s % 60;
    return (d ? t('dur_d', { d: num(d) }) : '') + (d || h ? pad(h) + ':' : '') + pad(m) + ':' + pad(x);
  }
  function iso(ms) { var s = Math.max(0, Math.ceil(ms / 1000)); return 'PT' + s + 'S'; }
  function waitText(s) {
    if (s < 60) return t('unit_s', { n: num(s) });
    if (s < 3600) return t('unit_m', { n: num(Math.ceil(s / 60)) });
    return t('unit_h', { n: num(Math.round(s / 360) / 10) });
  }

  /* ---- the server's clock ---------------------------------------------- */

  /* serverNow() = performance.now() + offset, from the time sample with the
   * shortest round trip (its error is at most half of it). */
  var clock = { offset: null, rtt: Infinity };
  function serverNow() { return performance.now() + (clock.offset != null ? clock.offset : Date.now() - performance.now()); }
  function sampleClock() {
    var t0 = performance.now();
    return call('GET', '/api/v1/time', { cache: 'no-store' }).then(function (r) {
      var t1 = performance.now();
      if (r.status === 200 && r.body && typeof r.body.now_ms === 'number' && t1 - t0 < clock.rtt) {
        clock.rtt = t1 - t0;
        clock.offset = r.body.now_ms - (t0 + t1) / 2;
      }
    });
  }

  /* ---- HTTP ------------------------------------------------------------ */

  /* {status, body, retry} - status 0 for a network error; retry: Retry-After in ms or null. */
  function call(method, path, o) {
    o = o || {};
    var h = {};
    if (user) h['X-User-Id'] = user;
    if (token) h.Authorization = 'Bearer ' + token;
    if (o.idem) h['Idempotency-Key'] = o.idem;
    if (o.pass) h['X-Queue-Pass'] = o.pass;
    if (o.body) h['Content-Type'] = 'application/json';
    return fetch(api + path, {
      method: method, headers: h, body: o.body ? JSON.stringify(o.body) : undefined,
      cache: o.cache || 'default', credentials: conf.credentials === 'include' ? 'include' : 'same-origin'
    }).then(function (res) {
      var ra = res.headers.get('Retry-After');
      return res.text().then(function (text) {
        var body = null;
        try { body = JSON.parse(text); } catch (e) { /* not JSON */ }
        return { status: res.status, body: body, retry: ra && /^\d+$/.test(ra) ? Number(ra) * 1000 : null };
      });
    }, function () { return { status: 0, body: null, retry: null }; });
  }
  /* Exponential back-off with full jitter: up to 1, 2, 4, 8 s. */
  function backoff(n) { return Math.round((0.5 + Math.random() * 0.5) * Math.min(8000, 1000 * Math.pow(2, n))); }

  /* ---- state ----------------------------------------------------------- */

  var S = {
    view: null,      /* the live read */
    unknown: false,
    queue: null,     /* the last waiting answer */
    queueState: '',  /* '', waiting, admitted, used, expired, sold_out, joining */
    pass: null,      /* {pass, exp} */
    idem: null,      /* the purchase's Idempotency-Key, kept until a final answer */
    buying: false,
    retry: null,     /* {code, until} while a purchase waits to be sent again */
    refusal: null,   /* {code, message} of the last final refusal */
    order: null,     /* {id, status, deadline} */
    acting: ''       /* paying, cancelling */
  };
  var saved = store.get(key) || {};
  if (saved.pass && saved.pass.exp > Date.now()) { S.pass = saved.pass; S.queueState = 'admitted'; }
  if (saved.idem) S.idem = saved.idem;
  if (saved.order) S.order = { id: saved.order, status: 'queued' };
  function save() { store.set(key, { pass: S.pass, idem: S.idem, order: S.order && S.order.id }); }

  var timers = {};
  function later(name, ms, fn) { clearTimeout(timers[name]); timers[name] = setTimeout(fn, Math.max(0, ms)); }

  /* ---- the live read: name, state, stock, at the server's pace ------- */

  function pollLive() {
    call('GET', '/api/v1/activities/' + aid + '/live').then(function (r) {
      if (r.status === 200 && r.body) {
        S.view = r.body;
        S.unknown = false;
        if (S.queueState === 'refused' && (r.body.state === 'open' || r.body.state === 'scheduled')) {
          S.queueState = '';
          S.refusal = null;
        }
        render();
        var p = r.body.poll_after_ms;
        if (p > 0) later('live', (document.hidden ? 4 : 1) * p * (1 + Math.random() * 0.2), pollLive);
        queueStep();
      } else if (r.status === 404) {
        S.unknown = true;
        render();
      } else {
        later('live', r.retry || 5000, pollLive);
      }
    });
  }

  function startMs() { return S.view ? S.view.start_ms : Infinity; }
  /* The start has passed on the server's clock, half a round trip included. */
  function started() { return S.view && serverNow() >= startMs() + (isFinite(clock.rtt) ? clock.rtt / 2 : 0); }
  function state() {
    if (!S.view) return 'loading';
    var s = S.view.state;
    if (s === 'scheduled' && started()) s = 'open';
    if (s === 'open' && serverNow() >= S.view.end_ms) s = 'ended';
    return s;
  }

  /* ---- the waiting room ------------------------------------------------- */

  function hasRoom() { return S.view && S.view.waiting_room; }
  /* Joins when the room takes buyers and this buyer has no pass, order or poll going. */
  function queueStep() {
    var s = state();
    if (!hasRoom() || S.order || S.pass || S.queueState !== '' || (s !== 'scheduled' && s !== 'open') ||
        S.view.sold_out) return;
    join();
  }
  function join() {
    S.queueState = 'joining';
    call('POST', '/api/v1/activities/' + aid + '/queue').then(onQueue);
  }
  function pollQueue() { call('GET', '/api/v1/activities/' + aid + '/queue').then(onQueue); }
  function onQueue(r) {
    var b = r.body || {};
    if (r.status === 200 && b.state === 'waiting') {
      S.queueState = 'waiting';
      S.queue = b;
      /* exactly at the server's pace, with up to a tenth more: never sooner */
      later('queue', b.poll_after_ms * (1 + Math.random() * 0.1), pollQueue);
    } else if (r.status === 200 && b.state === 'admitted') {
      S.queueState = 'admitted';
      S.pass = { pass: b.pass, exp: Date.parse(b.pass_expires_at) - clockSkew() };
      save();
      focusSoon('buy');
    } else if (r.status === 200 && (b.state === 'used' || b.state === 'expired' || b.state === 'sold_out')) {
      S.queueState = b.state;
    } else if (r.status === 409 && b.error === 'sold_out') {
      S.queueState = 'sold_out';
    } else if (r.status === 404 && b.error === 'not_in_queue') {
      S.queueState = '';
      later('queue', backoff(0), queueStep); /* the line was lost (docs/waiting-room.md): join again */
    } else if (r.status === 403) {
      /* closed or ended: the live read's pace decides when to try again */
      S.queueState = 'refused';
      S.refusal = { code: b.error || 'closed' };
    } else {
      /* 429, 503, network: ask again no sooner than told */
      S.queueState = S.queueState === 'joining' ? 'joining' : 'waiting';
      later('queue', r.retry || backoff(2), S.queueState === 'joining' ? join : pollQueue);
    }
    render();
  }
  /* The phone's clock minus the server's: pass expiry times are the server's. */
  function clockSkew() { return clock.offset == null ? 0 : serverNow() - Date.now(); }

  /* ---- the purchase ----------------------------------------------------- */

  function newKey() {
    var b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return Array.prototype.map.call(b, function (x) { return (x < 16 ? '0' : '') + x.toString(16); }).join('');
  }
  var MAX_TRIES = 8;
  function buy() {
    if (S.buying || !canBuy()) return;
    S.buying = true;
    S.refusal = null;
    if (!S.idem) { S.idem = newKey(); save(); }
    attempt(0);
  }
  function attempt(n) {
    S.retry = null;
    render();
    call('POST', '/api/v1/activities/' + aid + '/purchase', {
      body: { quantity: 1 }, idem: S.idem, pass: S.pass && S.pass.pass
    }).then(function (r) {
      var b = r.body || {}, code = b.error || '';
      if (r.status === 200 && b.order_id) {
        S.buying = false;
        S.order = { id: b.order_id, status: 'queued' };
        S.idem = null;
        S.pass = null;
        save();
        announce(t('accepted') + ' ' + t('processing'));
        pollOrder(0);
        later('live', 300, pollLive); /* the stock it shows went down by one */
        return;
      }
      if (r.status === 0 || r.status === 429 || r.status === 503) {
        /* not a final answer: the same request again, when told, with the same key */
        if (n + 1 >= MAX_TRIES) {
          S.buying = false;
          S.refusal = { code: 'gave_up' };
        } else {
          var wait = r.retry != null ? r.retry * (1 + Math.random() * 0.2) : backoff(n);
          S.retry = { code: r.status === 0 ? 'network' : code === 'recovering' ? 'recovering'
            : r.status === 429 ? 'rate_limited' : 'unavailable', until: performance.now() + wait };
          later('buy', wait, function () { attempt(n + 1); });
          tickSoon();
        }
        render();
        return;
      }
      /* a final answer: nothing was bought, a next click is a new request */
      S.buying = false;
      S.idem = null;
      S.refusal = { code: code || 'error', message: b.message || String(r.status) };
      if (code === 'no_pass') { S.pass = null; S.queueState = 'expired'; }
      if (code === 'sold_out' && S.view) S.view.sold_out = true;
      save();
      render();
    });
  }
  function canBuy() {
    var s = state();
    return !S.order && !S.buying && s === 'open' && !(S.view && S.view.sold_out) &&
      (!hasRoom() || (S.pass && S.pass.exp > Date.now()));
  }

  /* ---- the order -------------------------------------------------------- */

  function pollOrder(n) {
    if (!S.order) return;
    call('GET', '/api/v1/orders/' + encodeURIComponent(S.order.id)).then(function (r) {
      var b = r.body || {};
      if (r.status === 200) {
        S.order.status = b.status;
        S.order.deadline = Date.parse(b.pay_deadline);
        if (b.status === 'queued') later('order', Math.min(5000, 500 * Math.pow(2, n)), function () { pollOrder(n + 1); });
        if (b.status === 'created') focusSoon('pay');
      } else if (r.status === 404 && n > 6) {
        S.order = null;
        save();
      } else {
        later('order', r.retry || backoff(n), function () { pollOrder(n + 1); });
      }
      render();
      tickSoon();
    });
  }
  function orderAction(what) {
    if (!S.order || S.acting) return;
    S.acting = what === 'pay' ? 'paying' : 'cancelling';
    render();
    call('POST', '/api/v1/orders/' + encodeURIComponent(S.order.id) + '/' + what).then(function (r) {
      var b = r.body || {};
      S.acting = '';
      if (r.status === 200) S.order.status = b.status;
      else if (r.status === 409 && b.error === 'order_cancelled') S.order.status = 'cancelled';
      else if (r.status === 409 && b.error === 'order_paid') S.order.status = 'paid';
      else S.refusal = { code: 'error', message: b.message || String(r.status) };
      if (S.order.status === 'cancelled') { S.queueState = ''; S.pass = null; }
      save();
      render();
    });
  }

  /* ---- drawing ---------------------------------------------------------- */

  var lastSaid = '';
  function announce(text) {
    if (text && text !== lastSaid) { lastSaid = text; $('announce').textContent = text; }
  }
  function focusSoon(id) {
    setTimeout(function () {
      var a = document.activeElement, el = $(id);
      if (el && !el.disabled && (!a || a === document.body || a.disabled || a.offsetParent === null)) el.focus();
    }, 0);
  }

  /* What the panel says: [status, detail, tone, countdown ms or null]. */
  function panel() {
    var s = state(), v = S.view, o = S.order, now = serverNow();
    if (S.unknown) return [t('unknown'), '', 'bad'];
    if (!v) return [t('loading'), ''];
    if (o) {
      if (o.status === 'queued') return [t('accepted') + ' ' + t('processing'), t('processing_d'), 'ok'];
      if (o.status === 'paid') return [t('paid'), '', 'ok'];
      if (o.status === 'cancelled') return [t('cancelled'), t('cancelled_d')];
      if (o.status === 'created' && o.deadline <= now) return [t('pay_over'), t('pay_over_d'), 'bad'];
      return [t('created'), t('created_d'), 'ok', o.deadline - now];
    }
    if (S.retry) {
      return [t(S.retry.code), t('retry_d', { s: num(Math.max(1, Math.ceil((S.retry.until - performance.now()) / 1000))) }), 'bad'];
    }
    if (S.buying) return [t('buy_sending'), ''];
    if (s === 'ended') return [t('ended'), '', 'bad'];
    if (v.sold_out || S.queueState === 'sold_out') return [t('sold_out'), t('sold_out_d'), 'bad'];
    if (S.refusal) {
      var c = S.refusal.code;
      if (c === 'limit_exceeded') return [t(c), t('limit_exceeded_d', { n: num(v.per_user_limit) }), 'bad'];
      if (c === 'no_pass') return [t('no_pass'), t('no_pass_d'), 'bad'];
      if (c === 'gave_up') return [t('gave_up'), t('gave_up_d'), 'bad'];
      if (c === 'bad_request') return [t('bad_request', { m: S.refusal.message }), '', 'bad'];
      if (builtin(c)) return [t(c), '', 'bad'];
      return [t('error', { m: S.refusal.message || c }), '', 'bad'];
    }
    if (s === 'closed') return [t('closed'), t('closed_d')];
    if (hasRoom()) {
      if (S.pass) return [t('admitted'), t('admitted_d', { t: time(S.pass.exp) }), 'ok'];
      if (S.queueState === 'expired') return [t('pass_expired'), t('pass_expired_d'), 'bad'];
      if (S.queueState === 'used') return [t('pass_used'), ''];
      if (S.queueState === 'waiting' && S.queue && S.queue.position != null) return [t('queue_wait'), t('queue_wait_d')];
      if (S.queueState === 'waiting' || S.queueState === 'joining') {
        return [t('queue_before'), t('queue_before_d'), '', s === 'scheduled' ? startMs() - now : null];
      }
    }
    if (s === 'scheduled') return [t('countdown'), t('countdown_d'), '', startMs() - now];
    return [t('open'), t('open_d')];
  }

  function render() {
    var v = S.view, o = S.order;
    document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
    var title = brand.title && brand.title[lang] ? brand.title[lang] : builtin('lang_name');
    document.title = (v ? v.name + ' - ' : '') + title;
    $('shop').textContent = title;
    $('lang').textContent = t('lang_switch');
    $('lang').setAttribute('lang', lang === 'zh' ? 'en' : 'zh-CN');
    if (brand.logo) { $('logo').src = brand.logo; $('logo').alt = (brand.logo_alt && brand.logo_alt[lang]) || ''; $('logo').hidden = false; }
    $('name').textContent = v ? v.name : (S.unknown ? t('unknown') : t('loading'));
    $('stock').textContent = v ? t('stock', { n: num(v.stock_remaining), total: num(v.stock_initial) }) : '';
    $('limit').textContent = v ? t('limit', { n: num(v.per_user_limit) }) : '';
    $('when').textContent = v ? t('starts', { t: time(v.start_ms) }) + ' · ' + t('ends', { t: time(v.end_ms) }) : '';

    var p = panel();
    $('status').textContent = p[0];
    $('status').className = 'status' + (p[2] ? ' ' + p[2] : '');
    $('detail').textContent = p[1];
    var cd = $('countdown');
    if (p[3] != null) {
      cd.hidden = false;
      cd.textContent = clockText(p[3]);
      cd.setAttribute('datetime', iso(p[3]));
    } else {
      cd.hidden = true;
    }
    announce(p[0]);

    var q = S.queue, showQ = hasRoom() && !o && !S.pass && S.queueState === 'waiting' && q && q.position != null;
    $('queue').hidden = !showQ;
    if (showQ) {
      $('q-pos-label').textContent = t('q_pos');
      $('q-eta-label').textContent = t('q_eta');
      $('q-place-label').textContent = t('q_place');
      $('q-pos').textContent = num(q.position);
      $('q-eta').textContent = waitText(q.eta_s);
      $('q-place').textContent = num(q.place);
    }

    var buy = $('buy');
    var rejoin = hasRoom() && !o && (S.queueState === 'expired' || (S.refusal && S.refusal.code === 'no_pass'));
    buy.hidden = !!o;
    buy.disabled = rejoin ? false : !canBuy();
    var st = state(), soldOut = v && (v.sold_out || S.queueState === 'sold_out');
    buy.textContent = rejoin ? t('join_again') : S.buying ? t('buy_sending')
      : st === 'ended' ? t('ended') : soldOut ? t('sold_out')
      : st === 'scheduled' || st === 'closed' ? t('buy_wait')
      : hasRoom() && !S.pass ? t('buy_queue')
      : S.refusal && S.refusal.code === 'gave_up' ? t('buy_again') : t('buy');
    buy.dataset.action = rejoin ? 'join' : 'buy';
    var act = o && o.status === 'created' && o.deadline > serverNow();
    $('order-actions').hidden = !act;
    $('pay').textContent = S.acting === 'paying' ? t('paying') : t('pay');
    $('cancel').textContent = S.acting === 'cancelling' ? t('cancelling') : t('cancel');
    $('pay').disabled = $('cancel').disabled = !!S.acting;
    $('order-id').textContent = o ? t('order_id', { id: o.id }) : '';
  }

  /* The clock's tick: at each second of the server's clock and at the start
   * exactly (the button lights up then, not up to a second later). */
  function tick() {
    render();
    var now = serverNow(), next = 1000 - (now % 1000);
    var st = startMs() + (isFinite(clock.rtt) ? clock.rtt / 2 : 0);
    if (st > now && st - now < next) next = st - now + 1;
    later('tick', next, tick);
    if (state() === 'open' && S.view && S.view.state === 'scheduled' && canBuy()) focusSoon('buy');
  }
  function tickSoon() { later('tick', 0, tick); }

  $('buy').addEventListener('click', function () {
    if (this.dataset.action === 'join') {
      S.refusal = null;
      S.queueState = '';
      S.pass = null;
      save();
      join();
    } else {
      buy();
    }
  });
  $('pay').addEventListener('click', function () { orderAction('pay'); });
  $('cancel').addEventListener('click', function () { orderAction('cancel'); });
  $('lang').addEventListener('click', function () {
    lang = lang === 'zh' ? 'en' : 'zh';
    store.set('sk:lang', lang);
    lastSaid = '';
    render();
  });
  document.addEventListener('visibilitychange', function () {
    if (!document.hidden && S.view && S.view.poll_after_ms > 0) later('live', 0, pollLive);
  });

  render();
  if (!/^\d+$/.test(aid)) { S.unknown = true; render(); return; }
  /* three samples of the clock, the best kept; then the sale */
  sampleClock().then(sampleClock).then(sampleClock).then(function () {
    pollLive();
    if (S.order) pollOrder(0);
    tick();
  });
})();
