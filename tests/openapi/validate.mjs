// validate.mjs - checks docs/openapi.yaml against the service:
//   node validate.mjs NPM_DIR DOC ROUTES_DEF ANSWERS.jsonl
// 1. every route of src/http/routes.def (method and pattern) is a path and
//    operation of the document;
// 2. the headers the contract names are documented;
// 3. every recorded answer (one JSON line each: method, path, status,
//    content_type, body) matches a documented response of its operation:
//    the status is listed, the content type is the documented one, and a
//    JSON body validates against the response's schema (ajv, JSON Schema
//    2020-12 as OpenAPI 3.1 uses it).
// Prints a summary; exits 1 with every problem listed.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const [npmDir, docPath, routesPath, answersPath] = process.argv.slice(2);
const require = createRequire(npmDir + '/node_modules/');
const YAML = require('yaml');
const Ajv2020 = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats');

const doc = YAML.parse(readFileSync(docPath, 'utf8'));
const problems = [];

// 1. routes.def
const routes = [];
for (const m of readFileSync(routesPath, 'utf8').matchAll(/^SK_ROUTE(?:_IN\(\s*\w+,)?\(?\s*(\w+),\s*"(\w+)",\s*"([^"]+)"\)/gm))
  routes.push({ name: m[1], method: m[2].toLowerCase(), pattern: m[3] });
if (routes.length < 10) problems.push(`only ${routes.length} routes read from ${routesPath}`);
for (const r of routes)
  if (!doc.paths[r.pattern] || !doc.paths[r.pattern][r.method])
    problems.push(`route ${r.name}: ${r.method.toUpperCase()} ${r.pattern} is not in the document`);

// 2. headers
const text = readFileSync(docPath, 'utf8');
for (const h of ['X-User-Id', 'Authorization', 'Idempotency-Key', 'X-Queue-Pass', 'Retry-After'])
  if (!text.includes(h)) problems.push(`header ${h} is not documented`);

// 3. answers
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema({ $id: 'https://seckill.invalid/openapi', components: doc.components });
const deref = (x) => {
  while (x && x.$ref) {
    const parts = x.$ref.replace(/^#\//, '').split('/');
    x = parts.reduce((o, k) => o[k], doc);
  }
  return x;
};
const templates = Object.keys(doc.paths).map((p) => ({
  p, re: new RegExp('^' + p.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+') + '$'),
}));
const compiled = new Map();
const seen = new Set();
let n = 0;
const lines = readFileSync(answersPath, 'utf8').split('\n').filter(Boolean);
for (const line of lines) {
  const a = JSON.parse(line);
  const path = a.path.split('?')[0];
  const method = a.method.toLowerCase();
  const t = templates.find((x) => x.re.test(path) && doc.paths[x.p][method]);
  if (!t) {
    // a path no route has: the router's 404 (the document has no such path)
    if (a.status !== 404 && a.status !== 405 && a.status !== 400 && a.status !== 413 && a.status !== 431)
      problems.push(`${a.method} ${a.path} -> ${a.status}: no documented operation`);
    continue;
  }
  const op = doc.paths[t.p][method];
  const res = deref(op.responses[String(a.status)] || op.responses.default);
  if (!res) {
    problems.push(`${a.method} ${t.p} -> ${a.status}: status not documented`);
    continue;
  }
  const ctype = (a.content_type || '').split(';')[0].trim();
  const content = res.content || {};
  if (!content[ctype]) {
    problems.push(`${a.method} ${t.p} -> ${a.status}: content type "${ctype}" not documented`);
    continue;
  }
  seen.add(`${method} ${t.p} ${a.status}`);
  n++;
  if (ctype !== 'application/json') continue;
  let body;
  try { body = JSON.parse(a.body); } catch (e) {
    problems.push(`${a.method} ${t.p} -> ${a.status}: not JSON: ${a.body.slice(0, 80)}`);
    continue;
  }
  const key = `${method} ${t.p} ${a.status} ${ctype}`;
  let v = compiled.get(key);
  if (!v) {
    v = ajv.compile({ $id: 'https://seckill.invalid/r' + compiled.size, components: doc.components,
                      ...content[ctype].schema });
    compiled.set(key, v);
  }
  if (!v(body))
    problems.push(`${a.method} ${a.path} -> ${a.status}: ${ajv.errorsText(v.errors)}: ${a.body.slice(0, 200)}`);
}
console.log(`openapi: ${routes.length} routes of routes.def documented; ${n} answers ` +
            `(${seen.size} operation/status pairs) validated against the document`);
if (n < 50) problems.push(`only ${n} answers recorded: the contract tests did not run?`);
for (const p of problems) console.log('problem: ' + p);
process.exit(problems.length ? 1 : 0);
