/* sale.js - the buyer's page of one sale (docs/buyer-page.md).
 *
 * What it promises the servers: no purchase request before the start (the
 * countdown runs on the server's clock, learned from GET /api/v1/time);
 * the waiting room polled exactly at the server's poll_after_ms plus up to
 * a tenth of jitter, never sooner; one click, one purchase request with an
 * Idempotency-Key, and retries (after a 503, a 429 or a network error,
 * honouring Retry-After) with the same key; the order polled with back-off;
 * sold out learned from the cheap live read at the pace it suggests, never
 * from the purchase route; a sale's challenge (docs/challenges.md) solved in
 * Web Workers before the registration, the join or the purchase, a CAPTCHA
 * widget loaded from its provider only when the sale asks one. Texts: zh and en
 * (sk-brand may replace any). */
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
    pow: ['正在验证你的浏览器… {p}%', 'Checking your browser… {p}%'],
    pow_d: ['一次性的计算，防止机器人抢光。', 'A one-off computation that keeps bots from taking everything.'],
    captcha_wait: ['请先完成下方的人机验证', 'Please complete the check below first'],
    captcha_failed: ['人机验证未通过', 'The human check did not pass'],
    captcha_failed_d: ['请重新完成验证后再试。', 'Complete the check again, then try again.'],
    captcha_unavailable: ['人机验证暂时不可用', 'The human check is unavailable right now'],
    captcha_missing: ['无法加载人机验证', 'The human check could not be loaded'],
    challenge_failed: ['验证未通过：{m}', 'The check did not pass: {m}'],
    reg_soon: ['预约将于 {t} 开始', 'Registration opens at {t}'],
    reg_only_d: ['本次抢购仅限预约的买家参加。', 'Only registered buyers may buy in this sale.'],
    reg_open: ['预约进行中，{t} 截止', 'Registration is open until {t}'],
    reg_button: ['立即预约', 'Register'],
    reg_sending: ['预约中…', 'Registering…'],
    registered: ['你已预约', 'You are registered'],
    registered_d: ['抢购于 {t} 开始。', 'The sale starts at {t}.'],
    registered_draw_d: ['{t} 抽签，中签者可在限定时间内购买。', 'The draw is at {t}; winners may buy within their time.'],
    reg_closed: ['预约已截止', 'Registration is closed'],
    not_registered: ['你没有预约', 'You did not register'],
    registration_closed: ['预约已截止', 'Registration is closed'],
    registration_not_open: ['预约尚未开始', 'Registration has not opened yet'],
    draw_pending: ['等待抽签结果', 'Waiting for the draw'],
    draw_pending_d: ['你已预约；抽签结果出来后此页会自动更新。', 'You are registered; this page updates itself when the draw is made.'],
    draw_won: ['你中签了！', 'You won the draw!'],
    draw_wait: ['你的抽签顺位：第 {n} 位', 'Your place in the draw: {n}'],
    draw_wait_d: ['中签者未在时限内购买时，名额按顺位递补，此页会自动更新。', 'When winners do not buy in time, their turn passes on in draw order; this page updates itself.'],
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
    for (var x in o.headers || {}) h[x] = o.headers[x];
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

  /* ---- the challenge (docs/challenges.md) --------------------------------- */

  /* The proof of work, in Web Workers made from this function (a blob:
   * script: the page stays one file): SHA-256 of the challenge followed by
   * a decimal nonce, until the first `bits` bits are zero. The text's whole
   * 64-byte blocks are hashed once; each nonce costs the compression of the
   * one or two blocks left. Progress every 65536 tries. */
  function powWorker() {
    var K = [
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2];
    var KI = new Int32Array(K), W = new Int32Array(64);
    function compress(h, b, off) {
      var i, x, y, t1, t2;
      for (i = 0; i < 16; i++) {
        x = off + 4 * i;
        W[i] = (b[x] << 24) | (b[x + 1] << 16) | (b[x + 2] << 8) | b[x + 3];
      }
      for (i = 16; i < 64; i++) {
        x = W[i - 15];
        y = W[i - 2];
        /* every sum kept to 32 bits as it goes: V8 then stays in integers */
        W[i] = ((W[i - 16] + (((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3)) | 0) +
          ((W[i - 7] + (((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10))) | 0)) | 0;
      }
      var a = h[0], c1 = h[1], c2 = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
      for (i = 0; i < 64; i++) {
        t1 = (((k + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7)))) | 0) +
          ((((e & f) ^ (~e & g)) + KI[i]) | 0) + W[i]) | 0;
        t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) +
          ((a & c1) ^ (a & c2) ^ (c1 & c2))) | 0;
        k = g; g = f; f = e; e = (d + t1) | 0; d = c2; c2 = c1; c1 = a; a = (t1 + t2) | 0;
      }
      h[0] = (h[0] + a) | 0; h[1] = (h[1] + c1) | 0; h[2] = (h[2] + c2) | 0; h[3] = (h[3] + d) | 0;
      h[4] = (h[4] + e) | 0; h[5] = (h[5] + f) | 0; h[6] = (h[6] + g) | 0; h[7] = (h[7] + k) | 0;
    }
    onmessage = function (ev) {
      var text = ev.data.text, bits = ev.data.bits, i, L = text.length, full = L - L % 64;
      var tb = new Uint8Array(L), mid = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
      for (i = 0; i < L; i++) tb[i] = text.charCodeAt(i) & 0xff;
      for (i = 0; i < full; i += 64) compress(mid, tb, i);
      var rest = L - full, buf = new Uint8Array(128), h = new Int32Array(8), tries = 0;
      for (i = 0; i < rest; i++) buf[i] = tb[full + i];
      var dg = String(ev.data.start).split('').map(function (c) { return c.charCodeAt(0); });
      for (;;) {
        var m = rest + dg.length, end = m + 9 <= 64 ? 64 : 128, bitlen = (L + dg.length) * 8;
        for (i = 0; i < dg.length; i++) buf[rest + i] = dg[i];
        buf[m] = 0x80;
        for (i = m + 1; i < end - 4; i++) buf[i] = 0;
        buf[end - 4] = bitlen >>> 24; buf[end - 3] = (bitlen >>> 16) & 0xff;
        buf[end - 2] = (bitlen >>> 8) & 0xff; buf[end - 1] = bitlen & 0xff;
        h.set(mid);
        compress(h, buf, 0);
        if (end === 128) compress(h, buf, 64);
        tries++;
        if (bits === 0 || (h[0] >>> (32 - bits)) === 0) {
          postMessage({ nonce: String.fromCharCode.apply(null, dg), tries: tries });
          return;
        }
        if ((tries & 0xffff) === 0) postMessage({ tries: tries });
        for (i = dg.length - 1; i >= 0 && dg[i] === 57; i--) dg[i] = 48;
        if (i < 0) dg.unshift(49); else dg[i]++;
      }
    };
  }
  var powSrc = null;
  var POW_WORKERS = Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1));
  /* A nonce for text at bits, with every core the phone lends: each worker
   * counts from its own start; the first to find one ends them all. */
  function pow(text, bits, progress) {
    return new Promise(function (resolve, reject) {
      if (!powSrc) powSrc = URL.createObjectURL(new Blob(['(' + powWorker.toString() + ')()'], { type: 'text/javascript' }));
      var ws = [], tries = [], over = false;
      function end() { over = true; ws.forEach(function (w) { w.terminate(); }); }
      for (var i = 0; i < POW_WORKERS && !over; i++) {
        (function (i) {
          var w;
          try { w = new Worker(powSrc); } catch (e) { end(); reject(e); return; }
          ws.push(w);
          tries[i] = 0;
          w.onmessage = function (ev) {
            if (over) return;
            tries[i] = ev.data.tries;
            if (ev.data.nonce != null) { end(); resolve({ nonce: ev.data.nonce, tries: tries.reduce(function (a, b) { return a + b; }, 0) }); return; }
            progress(tries.reduce(function (a, b) { return a + b; }, 0));
          };
          w.onerror = function (e) { if (!over) { end(); reject(e); } };
          w.postMessage({ text: text, bits: bits, start: i * 1e12 });
        })(i);
      }
    });
  }

  /* The sale's challenge goes with the registration, and then with the
   * join (a waiting room) or the purchase. */
  function needsChallenge(kind) {
    if (!(S.view && S.view.challenge)) return false;
    return kind === 'register' || (kind === 'join') === !!S.view.waiting_room;
  }
  /* A fresh challenge solved: {hdr, exp (server ms), captcha}, or {error: the answer}. */
  function solveOne() {
    return call('GET', '/api/v1/activities/' + aid + '/challenge', { cache: 'no-store' }).then(function (r) {
      var b = r.body || {};
      if (r.status !== 200 || typeof b.challenge !== 'string') return { error: r };
      S.pow = { bits: b.bits, pct: 0 };
      render();
      var t0 = performance.now();
      return pow(b.challenge, b.bits, function (n) {
        if (S.pow) S.pow.pct = Math.min(99, Math.floor(100 * n / Math.pow(2, b.bits)));
        render();
      }).then(function (res) {
        S.pow = null;
        S.powLast = { bits: b.bits, ms: performance.now() - t0, tries: res.tries };
        return { hdr: b.challenge + '.' + res.nonce, exp: serverNow() + b.expires_in_ms, captcha: !!b.captcha };
      }, function () { S.pow = null; return { error: { status: 0, body: { error: 'pow' } } }; });
    });
  }
  /* A solution ready before it is needed (a sale without a waiting room:
   * the click then sends at once); one at a time, single use. */
  var ready = null, solving = null;
  function prepare() {
    if (ready && ready.exp - serverNow() < 15000) ready = null;
    if (ready || solving || !needsChallenge('purchase') || S.order || S.buying) return;
    var s = state();
    if (!(s === 'open' || (s === 'scheduled' && startMs() - serverNow() < 60000)) || S.view.sold_out) return;
    solving = solveOne().then(function (sol) { solving = null; if (!sol.error) ready = sol; return sol; });
  }
  function takeSolution() {
    if (ready && ready.exp - serverNow() > 15000) { var r = ready; ready = null; return Promise.resolve(r); }
    if (solving) return solving.then(function () { return takeSolution(); });
    return solveOne();
  }
  /* send(headers) with the challenge's headers when the sale asks one. */
  function withChallenge(kind, send) {
    if (!needsChallenge(kind)) return send({});
    return takeSolution().then(function (sol) {
      if (sol.error) return sol.error;
      return (sol.captcha ? captchaToken() : Promise.resolve(null)).then(function (tok) {
        var h = { 'X-Challenge': sol.hdr };
        if (tok) h['X-Captcha-Token'] = tok;
        return send(h).then(function (r) { if (tok) captchaReset(); return r; });
      });
    });
  }
  /* A challenge refused for its age, a second use or one made before the
   * sale recovered from a fault: a new one is worth a try. */
  function challengeAgain(b) { return /^challenge_(expired|replayed|required|stale)$/.test(b.error || ''); }

  /* The CAPTCHA widget, from its provider (the page's policy allows that
   * origin only when the server has a provider). The three APIs share
   * render(el, {sitekey, callback, ...}) and reset(id). */
  var CAPTCHA_GLOBAL = { turnstile: 'turnstile', hcaptcha: 'hcaptcha', recaptcha: 'grecaptcha' };
  var cap = { state: '', api: null, id: null, action: '', token: null, waiters: [] };
  function captchaSetup() {
    var c = S.view && S.view.challenge && S.view.challenge.captcha;
    if (c && cap.state === 'shown') captchaShow();
    if (!c || cap.state) return;
    if (!c.script || !c.site_key) { cap.state = 'failed'; return; }
    cap.state = 'loading';
    var s = document.createElement('script');
    s.src = c.script;
    s.async = true;
    s.onload = function () {
      var g = window[CAPTCHA_GLOBAL[c.provider]];
      if (!g || typeof g.render !== 'function') { cap.state = 'failed'; render(); return; }
      cap.api = g;
      captchaShow();
      render();
    };
    s.onerror = function () { cap.state = 'failed'; render(); };
    document.head.appendChild(s);
  }
  /* What the buyer does next with a token: Turnstile binds the token to
   * that action, and the server checks it against the route. */
  function captchaAction() {
    if (hasReg() && serverNow() < S.view.registration.end_ms && !(S.reg && S.reg.registered)) return 'register';
    return S.view.waiting_room ? 'join' : 'purchase';
  }
  /* The widget, rendered for the action at hand; Turnstile's is rendered
   * again (its action is fixed at render) once registration is done. */
  function captchaShow() {
    var c = S.view.challenge.captcha, el = $('captcha'), a = captchaAction();
    if (cap.id != null) {
      if (c.provider !== 'turnstile' || cap.action === a) return;
      try { if (cap.api.remove) cap.api.remove(cap.id); } catch (e) { /* the widget's own */ }
      cap.token = null;
      el.textContent = '';
    }
    el.hidden = false;
    var o = {
      sitekey: c.site_key,
      callback: function (tok) { cap.token = tok; var w = cap.waiters; cap.waiters = []; w.forEach(function (f) { f(); }); render(); },
      'expired-callback': function () { cap.token = null; render(); },
      'error-callback': function () { cap.token = null; render(); }
    };
    if (c.provider === 'turnstile') o.action = a;
    cap.action = a;
    cap.id = cap.api.render(el, o);
    cap.state = 'shown';
  }
  /* The widget's token, once the buyer has solved it (single use). */
  function captchaToken() {
    return new Promise(function (resolve) {
      function take() { var t = cap.token; cap.token = null; resolve(t); }
      if (cap.token) take(); else { cap.waiters.push(take); render(); }
    });
  }
  function captchaReset() {
    cap.token = null;
    try { if (cap.api && cap.api.reset) cap.api.reset(cap.id); } catch (e) { /* the widget's own */ }
  }

  /* ---- state ----------------------------------------------------------- */

  var S = {
    view: null,      /* the live read */
    unknown: false,
    queue: null,     /* the last waiting answer */
    queueState: '',  /* '', waiting, admitted, used, expired, sold_out, joining */
    pow: null,       /* {bits, pct} while a challenge is being solved */
    powLast: null,   /* {bits, ms, tries} of the last one solved */
    chTries: 0,      /* challenges refused for age or reuse in a row */
    pass: null,      /* {pass, exp} */
    idem: null,      /* the purchase's Idempotency-Key, kept until a final answer */
    buying: false,
    retry: null,     /* {code, until} while a purchase waits to be sent again */
    refusal: null,   /* {code, message} of the last final refusal */
    order: null,     /* {id, status, deadline} */
    acting: '',      /* paying, cancelling */
    reg: null,       /* the registration status answer (docs/fairness.md) */
    registering: false
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
        captchaSetup();
        if (hasReg()) regStatus();
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

  /* ---- pre-registration and the draw (docs/fairness.md) ---------------- */

  function hasReg() { return !!(S.view && S.view.registration); }
  function isDraw() { return hasReg() && S.view.registration.draw; }
  /* The buyer's registration, and for a draw their place and right to buy. */
  function regStatus() {
    return call('GET', '/api/v1/activities/' + aid + '/register', { cache: 'no-store' }).then(function (r) {
      if (r.status === 403 && r.body && r.body.error === 'not_registered') S.reg = { registered: false };
      if (r.status !== 200 || !r.body) { render(); return; }
      S.reg = r.body;
      if (r.body.pass && !S.order && (!S.pass || S.pass.pass !== r.body.pass)) {
        S.pass = { pass: r.body.pass, exp: r.body.pass_expires_ms };
        save();
      }
      render();
    });
  }
  function regOpen() {
    var g = S.view.registration, now = serverNow();
    return now >= g.start_ms && now < g.end_ms;
  }
  function register() {
    if (S.registering) return;
    S.registering = true;
    S.refusal = null;
    render();
    withChallenge('register', function (h) {
      return call('POST', '/api/v1/activities/' + aid + '/register', { headers: h });
    }).then(function (r) {
      var b = r.body || {};
      S.registering = false;
      if (r.status === 403 && challengeAgain(b) && S.chTries++ < 3) {
        register(); /* a fresh challenge */
        return;
      }
      if (r.status === 200) {
        S.chTries = 0;
        S.reg = b;
        captchaSetup(); /* the widget's next action: the join or the purchase */
      } else {
        S.refusal = { code: b.error || 'error', message: b.message || String(r.status) };
      }
      render();
    });
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
    withChallenge('join', function (h) {
      return call('POST', '/api/v1/activities/' + aid + '/queue', { headers: h });
    }).then(onQueue);
  }
  function pollQueue() { call('GET', '/api/v1/activities/' + aid + '/queue').then(onQueue); }
  function onQueue(r) {
    var b = r.body || {};
    if (r.status === 403 && challengeAgain(b) && S.chTries++ < 3) {
      S.queueState = '';
      later('queue', 0, queueStep);
    } else if (r.status === 403 && /^(challenge|captcha)_/.test(b.error || '')) {
      S.queueState = 'refused';
      S.refusal = { code: b.error, message: b.message };
    } else if (r.status === 200 && b.state === 'waiting') {
      S.chTries = 0;
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
    withChallenge('purchase', function (h) {
      return call('POST', '/api/v1/activities/' + aid + '/purchase', {
        body: { quantity: 1 }, idem: S.idem, pass: S.pass && S.pass.pass, headers: h
      });
    }).then(function (r) {
      var b = r.body || {}, code = b.error || '';
      if (r.status === 403 && challengeAgain(b) && S.chTries++ < 3) {
        attempt(n); /* a fresh challenge, the same key */
        return;
      }
      S.chTries = 0;
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
      (!hasRoom() || (S.pass && S.pass.exp > Date.now())) &&
      (!isDraw() || (S.pass && S.pass.exp > Date.now())) &&
      (!hasReg() || !!(S.reg && S.reg.registered));
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
    if (S.pow) return [t('pow', { p: num(S.pow.pct) }), t('pow_d')];
    if (cap.waiters.length) return [t(cap.state === 'failed' ? 'captcha_missing' : 'captcha_wait'), '', cap.state === 'failed' ? 'bad' : ''];
    if (S.buying) return [t('buy_sending'), ''];
    if (s === 'ended') return [t('ended'), '', 'bad'];
    if (v.sold_out || S.queueState === 'sold_out') return [t('sold_out'), t('sold_out_d'), 'bad'];
    if (S.refusal) {
      var c = S.refusal.code;
      if (c === 'limit_exceeded') return [t(c), t('limit_exceeded_d', { n: num(v.per_user_limit) }), 'bad'];
      if (c === 'no_pass') return [t('no_pass'), t('no_pass_d'), 'bad'];
      if (c === 'gave_up') return [t('gave_up'), t('gave_up_d'), 'bad'];
      if (c === 'bad_request') return [t('bad_request', { m: S.refusal.message }), '', 'bad'];
      if (c === 'captcha_failed') return [t(c), t('captcha_failed_d'), 'bad'];
      if (/^challenge_/.test(c)) return [t('challenge_failed', { m: S.refusal.message || c }), '', 'bad'];
      if (builtin(c)) return [t(c), '', 'bad'];
      return [t('error', { m: S.refusal.message || c }), '', 'bad'];
    }
    if (s === 'closed' && !hasReg()) return [t('closed'), t('closed_d')];
    if (hasReg() && s !== 'open') {
      var g = v.registration, mine = S.reg && S.reg.registered;
      if (S.registering) return [t('reg_sending'), ''];
      if (now < g.start_ms) return [t('reg_soon', { t: time(g.start_ms) }), t('reg_only_d'), '', g.start_ms - now];
      if (mine && isDraw() && now < g.end_ms) return [t('registered'), t('registered_draw_d', { t: time(g.end_ms) }), 'ok', g.end_ms - now];
      if (mine && !isDraw()) return [t('registered'), t('registered_d', { t: time(v.start_ms) }), 'ok', startMs() - now];
      if (!mine && now < g.end_ms) return [t('reg_open', { t: time(g.end_ms) }), t('reg_only_d'), '', g.end_ms - now];
      if (!mine) return [t('reg_closed'), t('reg_only_d'), 'bad'];
    }
    if (isDraw() && S.reg && S.reg.registered && !S.pass && S.reg.place > 0) {
      return [t('draw_wait', { n: num(S.reg.place) }), t('draw_wait_d')];
    }
    if (isDraw() && S.pass) return [t('draw_won'), t('admitted_d', { t: time(S.pass.exp) }), 'ok'];
    /* registration over, the draw not made yet: not "on sale" for this buyer */
    if (isDraw() && S.reg && S.reg.registered && !(S.reg.place > 0) && s === 'open') return [t('draw_pending'), t('draw_pending_d')];
    if (hasReg() && S.reg && !S.reg.registered && s === 'open') return [t('not_registered'), t('reg_only_d'), 'bad'];
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

    $('pow').hidden = !S.pow;
    if (S.pow) $('pow').value = S.pow.pct;
    /* the last solve, for a shop measuring what its difficulty costs */
    if (S.powLast) {
      $('pow').dataset.bits = S.powLast.bits;
      $('pow').dataset.ms = Math.round(S.powLast.ms);
      $('pow').dataset.tries = S.powLast.tries;
    }
    $('captcha').hidden = cap.state !== 'shown' || !!o;

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
    var rejoin = hasRoom() && !o && (S.queueState === 'expired' ||
      (S.refusal && /^(no_pass|captcha_failed|challenge_.*)$/.test(S.refusal.code)));
    var regNow = hasReg() && !o && !(S.reg && S.reg.registered) && regOpen();
    buy.hidden = !!o;
    buy.disabled = rejoin || (regNow && !S.registering) ? false : !canBuy();
    var st = state(), soldOut = v && (v.sold_out || S.queueState === 'sold_out');
    buy.textContent = regNow ? (S.registering ? t('reg_sending') : t('reg_button'))
      : rejoin ? t('join_again') : S.buying ? t('buy_sending')
      : st === 'ended' ? t('ended') : soldOut ? t('sold_out')
      : st === 'scheduled' || st === 'closed' ? t('buy_wait')
      : hasRoom() && !S.pass ? t('buy_queue')
      : S.refusal && S.refusal.code === 'gave_up' ? t('buy_again') : t('buy');
    buy.dataset.action = regNow ? 'register' : rejoin ? 'join' : 'buy';
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
    prepare();
    if (state() === 'open' && S.view && S.view.state === 'scheduled' && canBuy()) focusSoon('buy');
  }
  function tickSoon() { later('tick', 0, tick); }

  $('buy').addEventListener('click', function () {
    if (this.dataset.action === 'register') {
      register();
    } else if (this.dataset.action === 'join') {
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
