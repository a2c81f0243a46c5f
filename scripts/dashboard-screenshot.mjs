// dashboard-screenshot.mjs - a PNG of a page after it ran for a while in
// headless Chromium, through the DevTools protocol (real time, so the
// dashboard's charts have minutes of samples; --screenshot would shoot at
// load). Used for docs/dashboard.png while a demo sale runs:
//
//   node --experimental-websocket scripts/dashboard-screenshot.mjs \
//        http://127.0.0.1:9090/ docs/dashboard.png 90 1400x1250
//
// Loopback only: the page is the node's own ops listener.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [url, out, secs = '60', size = '1400x1200'] = process.argv.slice(2);
if (!url || !out) {
  console.error('usage: dashboard-screenshot.mjs URL OUT.png [SECONDS] [WxH]');
  process.exit(2);
}
const [w, h] = size.split('x').map(Number);
const port = 9300 + Math.floor(Math.random() * 500);
const profile = mkdtempSync(join(tmpdir(), 'seckill-shot-'));
const chrome = spawn('chromium', ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
  '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync',
  `--user-data-dir=${profile}`, `--remote-debugging-port=${port}`, `--window-size=${w},${h}`, url],
  { stdio: 'ignore' });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
try {
  let target;
  for (let i = 0; i < 100 && !target; i++) {
    await sleep(100);
    try {
      const list = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
      target = list.find((t) => t.type === 'page');
    } catch { /* not up yet */ }
  }
  if (!target) throw new Error('chromium did not come up');
  await sleep(Number(secs) * 1000);
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((r) => ws.addEventListener('open', r));
  let id = 0;
  const call = (method, params = {}) => new Promise((resolve) => {
    const my = ++id;
    const on = (ev) => {
      const m = JSON.parse(ev.data);
      if (m.id === my) { ws.removeEventListener('message', on); resolve(m.result); }
    };
    ws.addEventListener('message', on);
    ws.send(JSON.stringify({ id: my, method, params }));
  });
  await call('Emulation.setDeviceMetricsOverride', { width: w, height: h, deviceScaleFactor: 1, mobile: false });
  await sleep(1500); // one more poll at the new size
  const shot = await call('Page.captureScreenshot', { format: 'png' });
  writeFileSync(out, Buffer.from(shot.data, 'base64'));
  ws.close();
  console.log(`${out} written`);
} finally {
  chrome.kill('SIGTERM');
  await sleep(300);
  rmSync(profile, { recursive: true, force: true });
}
