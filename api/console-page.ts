import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/** Static files of the browser terminal, by name under /v1/console/assets/. */
export interface ConsoleAsset {
  type: string;
  body: string | Buffer;
}

/** xterm.js and its stylesheet from the installed package, plus our page script; read once. */
export function loadConsoleAssets(): Map<string, ConsoleAsset> {
  const lib = createRequire(import.meta.url).resolve('@xterm/xterm');
  return new Map<string, ConsoleAsset>([
    ['xterm.js', { type: 'text/javascript; charset=utf-8', body: readFileSync(lib) }],
    ['xterm.css', { type: 'text/css; charset=utf-8', body: readFileSync(path.join(path.dirname(lib), '../css/xterm.css')) }],
    ['terminal.js', { type: 'text/javascript; charset=utf-8', body: TERMINAL_JS }],
  ]);
}

/**
 * The page script: the websocket is the page's own URL without "/view". Output arrives as
 * binary frames; keystrokes go out as binary frames (a read-only session ignores them).
 */
const TERMINAL_JS = `'use strict';
(function () {
  var status = document.getElementById('status');
  var term = new Terminal({ cursorBlink: true, scrollback: 10000, convertEol: false });
  term.open(document.getElementById('terminal'));
  term.focus();
  var url = location.href.replace(/^http/, 'ws').replace(/\\/view\\/?(\\?.*)?(#.*)?$/, '');
  var ws = new WebSocket(url);
  ws.binaryType = 'arraybuffer';
  var encoder = new TextEncoder();
  ws.onopen = function () { status.textContent = 'Connected'; status.className = 'ok'; };
  ws.onmessage = function (e) {
    term.write(typeof e.data === 'string' ? e.data : new Uint8Array(e.data));
  };
  ws.onclose = function (e) {
    status.textContent = 'Disconnected' + (e.reason ? ': ' + e.reason : '') + ' (' + e.code + ')';
    status.className = 'closed';
  };
  term.onData(function (d) { if (ws.readyState === 1) ws.send(encoder.encode(d)); });
})();
`;

/** The terminal page; `title` is already HTML-safe (a node UUID). */
export function consolePage(title: string, mode: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Console of node ${title}</title>
<link rel="stylesheet" href="/v1/console/assets/xterm.css">
<style>
  body { margin: 0; background: #111; color: #ddd; font-family: sans-serif; }
  header { padding: 6px 10px; font-size: 14px; }
  #status.ok { color: #7c7; } #status.closed { color: #e77; }
  #terminal { padding: 4px; }
</style>
</head>
<body>
<header>Node ${title} &middot; ${mode === 'rw' ? 'read-write' : 'read-only'} &middot; <span id="status">Connecting…</span></header>
<div id="terminal"></div>
<script src="/v1/console/assets/xterm.js"></script>
<script src="/v1/console/assets/terminal.js"></script>
</body>
</html>
`;
}
