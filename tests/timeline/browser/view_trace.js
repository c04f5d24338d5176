#!/usr/bin/env node
// Loads horovodcpp timelines into real viewers in headless Chromium and checks that they draw
// what the file says:
//   speedscope  its bundled web app (npm `speedscope`), served from localhost, the trace opened
//               through #profileURL; what it imported is read back through its own Export.
//   DevTools    Chromium's own Performance panel (the trace_app page the browser serves on its
//               debugging port), the trace opened with the panel's "Load trace…" button; what it
//               parsed is read back from the panel.
// For every trace: no import error and no begin/end complaint in either console, every span the
// file closes (X, or a B with its E) has the same duration in both viewers, and the longest
// MPI_ALLREDUCE is reported. A trace marked "open" (from a killed run) may hold spans still
// open at the end; speedscope's notice about closing them is then expected.
//
// usage: node view_trace.js OUT_DIR LABEL=TRACE[:open] ...   (screenshots go to OUT_DIR)
'use strict';

const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');
const puppeteer = require('puppeteer-core');

const kChromium = process.env.HVD_CHROMIUM || '/usr/bin/chromium';
const kSpeedscope = path.join(__dirname, 'node_modules', 'speedscope', 'dist', 'release');
const kStepTimeoutMs = 60000;
const kSlackUs = 0.01;  // the file has nanosecond digits; viewers sum doubles

// Console lines that are about the headless GPU, not the trace.
const kBenign = [/WebGL/, /GL Driver Message/, /GPU stall/, /favicon\.ico/, /Autofocus processing/];
// Lines that mean a viewer mis-read the trace.
const kBeginEndTrouble = [/Tried to end/, /mismatch/i, /still open at end of profile/, /unmatched/i];

function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exit(1);
}

// The spans the file closes, per row "pid/tid": {name, ts, dur} (us), in file order; and the
// spans it leaves open.
function spansOfFile(events) {
  const rows = new Map();
  const open = new Map();
  let unclosed = 0;
  const row = (e) => `${e.pid}/${e.tid}`;
  const add = (key, span) => {
    if (!rows.has(key)) rows.set(key, []);
    rows.get(key).push(span);
  };
  for (const e of events) {
    if (e.ph === 'X') add(row(e), {name: e.name, ts: e.ts, dur: e.dur});
    if (e.ph === 'B') {
      if (!open.has(row(e))) open.set(row(e), []);
      open.get(row(e)).push(e);
    }
    if (e.ph === 'E') {
      const b = (open.get(row(e)) || []).pop();
      if (b) add(row(e), {name: b.name, ts: b.ts, dur: e.ts - b.ts});
    }
  }
  for (const stack of open.values()) unclosed += stack.length;
  const rowEnd = new Map();  // row -> its last event's time
  for (const e of events) {
    if (e.ph === 'M') continue;
    const end = e.ts + (e.ph === 'X' ? e.dur : 0);
    rowEnd.set(row(e), Math.max(rowEnd.get(row(e)) || -Infinity, end));
  }
  return {rows, unclosed, open, rowEnd};
}

// Sorted "name dur" keys of a row's spans, durations in whole nanoseconds (the file's digits).
function keys(spans) {
  return spans.map((s) => `${s.name} ${Math.round(s.dur * 1000)}`).sort();
}

function compareRows(viewer, label, fileRows, viewerRows) {
  let compared = 0;
  for (const [row, spans] of fileRows) {
    const seen = viewerRows.get(row);
    if (!seen) fail(`${viewer}: ${label}: row ${row} (${spans.length} spans) is missing`);
    const want = keys(spans);
    const got = new Map();
    for (const k of keys(seen)) got.set(k, (got.get(k) || 0) + 1);
    for (const k of want) {
      const n = got.get(k) || 0;
      if (n === 0) {
        const [name] = k.split(' ');
        const near = keys(seen).filter((g) => g.startsWith(name + ' ')).slice(0, 3);
        fail(`${viewer}: ${label}: row ${row}: the span "${k}" of the ` +
             `file (name, duration in ns) is not drawn with that duration; the viewer has e.g. ${near.join(', ')}`);
      }
      got.set(k, n - 1);
      ++compared;
    }
  }
  return compared;
}

// A span the file leaves open (a run killed inside it) must still be drawn: the viewer has one
// more span of that name on the row than the file closes. speedscope ends each row's profile at
// that row's last event, so an open span that begins there has no width in it (`rowEnd` given:
// such spans are counted, not required). Returns how many open spans were not drawn that way.
function checkOpenDrawn(viewer, label, fileRows, open, viewerRows, rowEnd) {
  let zeroWidth = 0;
  for (const [row, stack] of open) {
    for (const b of stack) {
      if (rowEnd && b.ts >= rowEnd.get(row)) {
        ++zeroWidth;
        continue;
      }
      const closed = (fileRows.get(row) || []).filter((s) => s.name === b.name).length;
      const drawn = (viewerRows.get(row) || []).filter((s) => s.name === b.name).length;
      if (drawn < closed + stack.filter((o) => o.name === b.name).length) {
        fail(`${viewer}: ${label}: row ${row}: the span "${b.name}" left open in the file is not drawn`);
      }
    }
  }
  return zeroWidth;
}

function serve(traces) {
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(req.url.split('?')[0].split('#')[0]);
    let file;
    if (url.startsWith('/trace/')) {
      file = traces.get(url.slice('/trace/'.length));
    } else {
      file = path.join(kSpeedscope, url === '/' ? 'index.html' : path.normalize(url));
      if (!file.startsWith(kSpeedscope)) file = undefined;
    }
    if (!file || !fs.existsSync(file)) {
      res.writeHead(404);
      res.end();
      return;
    }
    const types = {'.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css',
                   '.json': 'application/json', '.wasm': 'application/wasm'};
    res.writeHead(200, {'Content-Type': types[path.extname(file)] || 'application/octet-stream',
                        'Access-Control-Allow-Origin': '*'});
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function watchConsole(page, sink) {
  page.on('console', (m) => {
    // A failed load is named by its URL, so that the browser's own favicon probe can be told apart.
    const where = m.location() && m.location().url ? ` (${m.location().url})` : '';
    sink.push(`${m.type()}: ${m.text()}${where}`);
  });
  page.on('pageerror', (e) => sink.push(`pageerror: ${e.message}`));
}

function checkConsole(viewer, label, lines, allowOpen) {
  for (const line of lines) {
    if (kBenign.some((re) => re.test(line))) continue;
    if (allowOpen && /still open at end of profile/.test(line)) continue;
    if (kBeginEndTrouble.some((re) => re.test(line))) fail(`${viewer}: ${label}: ${line}`);
    if (/^(error|pageerror)/.test(line)) fail(`${viewer}: ${label}: console ${line}`);
  }
}

// Picks the row of `focus` (row, ts of an MPI_ALLREDUCE) in speedscope's profile list, zooms
// the flame chart in on the span and hovers it, so that the tooltip shows its duration.
async function screenshotSpan(page, model, focus, png) {
  const [pid, tid] = focus.row.split('/');
  const profile = model.profiles.find((p) => p.name.includes(`(pid ${pid})`) &&
                                             p.name.includes(`(tid ${tid})`));
  if (!profile) return;
  await page.mouse.click(800, 10);  // the profile name: opens the list of rows
  await new Promise((r) => setTimeout(r, 300));
  await page.mouse.click(800, 41);  // its filter
  await page.keyboard.type(profile.name);
  await new Promise((r) => setTimeout(r, 300));
  await page.mouse.click(700, 107);  // the one row left
  await new Promise((r) => setTimeout(r, 500));
  const width = page.viewport().width;
  const at = focus.ts - focus.rowStart;  // speedscope puts each row's first event at 0
  const x = Math.round(((at + focus.dur / 2) / (profile.endValue - profile.startValue)) * width);
  await page.mouse.move(x, 300);
  await page.keyboard.down('Control');
  for (let i = 0; i < 10; ++i) {
    await page.mouse.wheel({deltaY: -12});
    await new Promise((r) => setTimeout(r, 60));
  }
  await page.keyboard.up('Control');
  await new Promise((r) => setTimeout(r, 500));
  await page.mouse.move(x, 170);  // depth 1: the op's activities
  await new Promise((r) => setTimeout(r, 500));
  await page.screenshot({path: png});
}

async function speedscope(browser, port, name, label, file, allowOpen, outDir, focus) {
  const page = await browser.newPage();
  await page.setViewport({width: 1600, height: 420});
  const lines = [];
  watchConsole(page, lines);
  const downloads = fs.mkdtempSync(path.join(os.tmpdir(), 'hvd-speedscope-'));
  const cdp = await page.createCDPSession();
  await cdp.send('Browser.setDownloadBehavior', {behavior: 'allow', downloadPath: downloads});
  const traceUrl = `http://127.0.0.1:${port}/trace/${name}`;
  await page.goto(`http://127.0.0.1:${port}/#profileURL=${encodeURIComponent(traceUrl)}`);
  await page.waitForFunction(() => / - speedscope$/.test(document.title), {timeout: kStepTimeoutMs})
      .catch(() => fail(`speedscope: ${label}: the trace did not load (title "${lines.join(' | ')}")`));
  // Its own export of what it imported: one evented profile per row, frames opened and closed.
  const exported = await page.evaluate(() => {
    // The innermost element whose text is the toolbar's "Export".
    const button = [...document.querySelectorAll('body *')].find(
        (e) => /Export/.test(e.textContent) && ![...e.children].some((c) => /Export/.test(c.textContent)));
    if (button) button.click();
    return !!button;
  });
  if (!exported) fail(`speedscope: ${label}: no Export button`);
  let file_ = '';
  for (let i = 0; i < 200 && !file_; ++i) {
    await new Promise((r) => setTimeout(r, 100));
    file_ = fs.readdirSync(downloads).find((f) => f.endsWith('.json')) || '';
  }
  if (!file_) fail(`speedscope: ${label}: its export produced no file`);
  const model = JSON.parse(fs.readFileSync(path.join(downloads, file_), 'utf8'));
  fs.rmSync(downloads, {recursive: true, force: true});
  // Each profile is named "<process> (pid P), <thread> (tid T)".
  const rows = new Map();
  for (const profile of model.profiles) {
    const id = /\(pid ([^)]*)\).*\(tid ([^)]*)\)/.exec(profile.name) ||
               /\(pid ([^,]*), tid ([^)]*)\)/.exec(profile.name);
    if (!id) fail(`speedscope: ${label}: cannot tell the row of profile "${profile.name}"`);
    const opened = [];
    const spans = [];
    for (const e of profile.events) {
      const frame = model.shared.frames[e.frame].name.split(' {')[0];
      if (e.type === 'O') opened.push({name: frame, at: e.at});
      else {
        const o = opened.pop();
        spans.push({name: o.name, ts: o.at, dur: e.at - o.at});
      }
    }
    rows.set(`${id[1]}/${id[2]}`, spans);
  }
  checkConsole('speedscope', label, lines, allowOpen);
  if (outDir && focus) await screenshotSpan(page, model, focus, path.join(outDir, `speedscope-${label}.png`));
  await page.close();
  return rows;
}

async function devtools(browser, devtoolsPort, label, file, outDir) {
  const page = await browser.newPage();
  await page.setViewport({width: 1600, height: 900});
  const lines = [];
  watchConsole(page, lines);
  await page.goto(`http://127.0.0.1:${devtoolsPort}/devtools/trace_app.html`, {waitUntil: 'load'});
  // The Performance panel, and its own "Load trace…" button, as a user would click it.
  await page.waitForSelector('pierce/#tab-timeline', {timeout: kStepTimeoutMs})
      .catch(() => fail(`DevTools: ${label}: the Performance panel's tab did not appear`));
  await page.evaluate(async () => {
    const ui = await import('./ui/legacy/legacy.js');
    await ui.ViewManager.ViewManager.instance().showView('timeline');
  });
  await page.waitForSelector('pierce/button[aria-label^="Load trace"]', {timeout: kStepTimeoutMs})
      .catch(() => fail(`DevTools: ${label}: no "Load trace…" button in the Performance panel`));
  // The file input behind that button: choosing the file there is what the button's dialog does.
  const input = await page.waitForSelector('pierce/input[type="file"]', {timeout: kStepTimeoutMs})
      .catch(() => fail(`DevTools: ${label}: the Performance panel has no file input`));
  await input.uploadFile(file);
  const handle = await page.waitForFunction(async () => {
    const timeline = await import('./panels/timeline/timeline.js');
    let parsed = null;
    try {
      parsed = timeline.TimelinePanel.TimelinePanel.instance().getParsedTraceForLayoutTests();
    } catch {
      return null;  // not loaded yet ("No trace index active")
    }
    if (!parsed || !parsed.Renderer) return null;
    const rows = [];
    for (const [pid, process] of parsed.Renderer.processes) {
      for (const [tid, thread] of process.threads) {
        rows.push([`${pid}/${tid}`, (thread.entries || []).map((e) => ({
          name: e.name, ts: e.ts, dur: e.dur === undefined ? 0 : e.dur}))]);
      }
    }
    return JSON.stringify({rows, warnings: JSON.stringify(parsed.Warnings || {})});
  }, {timeout: kStepTimeoutMs, polling: 250}).catch((e) =>
      fail(`DevTools: ${label}: the trace was not parsed (${e.message}); console: ${lines.join(' | ')}`));
  const result = JSON.parse(await handle.jsonValue());
  checkConsole('DevTools', label, lines, false);
  if (outDir) {
    await new Promise((r) => setTimeout(r, 1000));  // let the flame chart paint
    await page.screenshot({path: path.join(outDir, `devtools-${label}.png`)});
  }
  await page.close();
  return new Map(result.rows);  // DevTools timestamps and durations are in microseconds too
}

async function main() {
  const [outDir, ...specs] = process.argv.slice(2);
  if (!outDir || specs.length === 0) fail('usage: node view_trace.js OUT_DIR LABEL=TRACE[:open] ...');
  if (!fs.existsSync(kChromium)) fail(`no browser at ${kChromium}`);
  fs.mkdirSync(outDir, {recursive: true});
  const traces = new Map();
  const jobs = [];
  for (const spec of specs) {
    const [label, rest] = spec.split('=');
    const allowOpen = rest.endsWith(':open');
    const file = path.resolve(allowOpen ? rest.slice(0, -5) : rest);
    traces.set(`${label}.json`, file);
    jobs.push({label, file, allowOpen, name: `${label}.json`});
  }
  const server = await serve(traces);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'hvd-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: kChromium,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync',
           `--user-data-dir=${profile}`, '--remote-debugging-port=0'],
  });
  const devtoolsPort = new URL(browser.wsEndpoint()).port;
  try {
    for (const job of jobs) {
      const events = JSON.parse(fs.readFileSync(job.file, 'utf8'));
      const {rows, unclosed, open, rowEnd} = spansOfFile(events);
      let longest = null;
      for (const [row, spans] of rows) {
        for (const s of spans) {
          if (s.name === 'MPI_ALLREDUCE' && (!longest || s.dur > longest.dur)) longest = {row, ...s};
        }
      }
      if (!longest) fail(`${job.label}: the trace holds no closed MPI_ALLREDUCE span`);
      const rowStart = Math.min(...events.filter((e) => e.ph !== 'M' && `${e.pid}/${e.tid}` === longest.row)
                                         .map((e) => e.ts));
      const ss = await speedscope(browser, server.address().port, job.name, job.label, job.file,
                                  job.allowOpen, outDir, {...longest, rowStart});
      const dt = await devtools(browser, devtoolsPort, job.label, job.file, outDir);
      const n1 = compareRows('speedscope', job.label, rows, ss);
      const n2 = compareRows('DevTools', job.label, rows, dt);
      const flat = checkOpenDrawn('speedscope', job.label, rows, open, ss, rowEnd);
      checkOpenDrawn('DevTools', job.label, rows, open, dt);
      const shown = (viewerRows) => {
        const match = (viewerRows.get(longest.row) || []).find(
            (s) => s.name === 'MPI_ALLREDUCE' && Math.abs(s.dur - longest.dur) < kSlackUs);
        return match ? match.dur.toFixed(3) : 'missing';
      };
      console.log(`${job.label}: ${path.basename(job.file)}: ${events.length} events, ` +
                  `${rows.size} rows, ${unclosed} span(s) open at the end (DevTools drew all, speedscope ` +
                  `${unclosed - flat}: ${flat} begin at their row's last event); speedscope drew ${n1} ` +
                  `and DevTools ${n2} closed spans with the file's durations; longest ` +
                  `MPI_ALLREDUCE (row ${longest.row}): file ${longest.dur.toFixed(3)} us, ` +
                  `speedscope ${shown(ss)} us, DevTools ${shown(dt)} us`);
    }
  } finally {
    await browser.close();
    server.close();
    fs.rmSync(profile, {recursive: true, force: true});
  }
  console.log('PASS');
}

main().catch((e) => fail(e.stack || String(e)));
