// Writes the example logs shipped in examples/ (run once; the output is
// committed): examples/session.jsonl, a realistic coding-agent session of a
// few hundred events with one compaction and a model switch, and
// examples/interrupted.jsonl, the same session cut by a crash inside its last
// turn (a tool call without its result, then a torn final line).
//
//   node scripts/make-examples.mjs
//
// Every event goes through Session.append (so the log is valid by
// construction); the clock is fixed so the output is the same on every run.

import { createRequire } from 'node:module'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const { Session } = require(path.join(root, 'index.js'))

// ---------------------------------------------------------------- clock

let clock = Date.UTC(2025, 10, 3, 9, 12, 4)
const realNow = Date.now
Date.now = () => clock
const wait = (ms) => {
  clock += ms
}

// ---------------------------------------------------------------- the session

const ID = 'b7e2c4d1-5f3a-4c8e-9d21-acme-orders-fix'
const CWD = '/home/dev/acme-api'
const USER = { kind: 'user' }
const s = new Session(ID, [], { version: 0, id: ID, createdAt: clock, cwd: CWD })

const TOOLS = [
  {
    name: 'read',
    description: 'Read a file from the workspace. Returns numbered lines.',
    parameters: { type: 'object', properties: { file_path: { type: 'string' }, offset: { type: 'number' }, limit: { type: 'number' } }, required: ['file_path'] },
  },
  {
    name: 'edit',
    description: 'Replace an exact string in a file with another string.',
    parameters: { type: 'object', properties: { file_path: { type: 'string' }, old_string: { type: 'string' }, new_string: { type: 'string' } }, required: ['file_path', 'old_string', 'new_string'] },
  },
  {
    name: 'bash',
    description: 'Run a shell command in the workspace and return its output and exit code.',
    parameters: { type: 'object', properties: { command: { type: 'string' }, timeout_ms: { type: 'number' } }, required: ['command'] },
  },
  {
    name: 'grep',
    description: 'Search the workspace for a regular expression; returns matching lines with file and line number.',
    parameters: { type: 'object', properties: { pattern: { type: 'string' }, path: { type: 'string' } }, required: ['pattern'] },
  },
  {
    name: 'todo_write',
    description: 'Record the current plan as a list of todos with their status.',
    parameters: { type: 'object', properties: { todos: { type: 'array', items: { type: 'object' } } }, required: ['todos'] },
  },
]

const SYSTEM = [
  'You are a coding agent working in a TypeScript repository on the user\'s machine.',
  'Work in small, verifiable steps: read before you edit, run the tests after every change,',
  'and report what you changed and why. Never modify files under src/generated/.',
  'Prefer the edit tool over rewriting whole files. Keep answers short and concrete.',
  `The workspace is ${CWD}. The test command is \`npm test\`; the linter is \`npm run lint\`.`,
].join('\n')

function header(model, temperature) {
  return { config: { provider: 'deepseek', model, temperature, maxTokens: 8192 }, system: SYSTEM, tools: TOOLS }
}

let turn = 0
let step = 0
let calls = 0
let model = 'deepseek-chat'

function startTurn(text) {
  wait(45_000)
  turn += 1
  step = 0
  s.append('turn/start', { turn, trigger: { kind: 'message', source: USER } })
  if (text !== undefined) s.append('user/message', { content: [{ type: 'text', text }], source: USER }, { surfaceOp: 'append' })
}

function endTurn() {
  wait(5)
  s.append('turn/end', { turn, reason: { kind: 'completed' } })
}

/** Words of `text` in deltas of about `per` words. */
function deltas(text, per = 4) {
  const words = text.match(/\S+\s*/g) ?? []
  const out = []
  for (let i = 0; i < words.length; i += per) out.push(words.slice(i, i + per).join(''))
  return out
}

/**
 * One model step: stream the reasoning, text and tool call, log the message,
 * then run the tool. `tool` is `{ name, args, result, isError?, ms }`.
 */
function modelStep({ reasoning, text, tool, headerReason, usage }) {
  step += 1
  wait(20)
  s.append('step/start', { turn, step })
  if (headerReason !== undefined) s.append('request/header', { header: header(model, model === 'deepseek-chat' ? 0.2 : 0.6), reason: headerReason })
  wait(650)
  const chunkSeqs = []
  const chunk = (c) => {
    wait(35)
    chunkSeqs.push(s.append('assistant/chunk', { turn, step, chunk: c }).seq)
  }
  const content = []
  let index = 0
  if (reasoning !== undefined) {
    chunk({ type: 'block-start', index, blockType: 'reasoning' })
    for (const d of deltas(reasoning, 6)) chunk({ type: 'reasoning-delta', index, text: d })
    chunk({ type: 'block-end', index, block: { type: 'reasoning', text: reasoning } })
    content.push({ type: 'reasoning', text: reasoning })
    index += 1
  }
  if (text !== undefined) {
    chunk({ type: 'block-start', index, blockType: 'text' })
    for (const d of deltas(text, 5)) chunk({ type: 'text-delta', index, text: d })
    chunk({ type: 'block-end', index, block: { type: 'text', text } })
    content.push({ type: 'text', text })
    index += 1
  }
  let call
  if (tool !== undefined) {
    calls += 1
    const id = `call_${String(calls).padStart(2, '0')}_${(0x9e3779b1 * calls >>> 0).toString(36)}`
    const args = JSON.stringify(tool.args)
    chunk({ type: 'block-start', index, blockType: 'tool-call' })
    const parts = args.length > 40 ? [args.slice(0, 24), args.slice(24)] : [args]
    parts.forEach((d, i) => chunk(i === 0 ? { type: 'tool-call-delta', index, id, name: tool.name, argumentsDelta: d } : { type: 'tool-call-delta', index, id, argumentsDelta: d }))
    call = { type: 'tool-call', id, name: tool.name, arguments: args }
    chunk({ type: 'block-end', index, block: call })
    content.push(call)
  }
  chunk({ type: 'usage', usage })
  chunk({ type: 'finish', reason: { kind: tool === undefined ? 'stop' : 'tool-calls' } })
  s.append('assistant/message', { turn, step, content, provenance: { provider: 'deepseek', model }, usage }, { surfaceOp: 'append', sourceEventSeqs: chunkSeqs })
  if (tool !== undefined) {
    const callSeq = s.append('tool/call', { turn, step, callId: call.id, name: call.name, arguments: call.arguments }).seq
    if (tool.during !== undefined) tool.during()
    if (tool.result !== undefined) {
      wait(tool.ms ?? 40)
      const data = { turn, step, callId: call.id, content: [{ type: 'text', text: tool.result }], isError: tool.isError === true }
      if (tool.isError === true) data.error = { name: tool.errorName ?? 'ToolError', code: tool.errorCode ?? 'failed' }
      if (tool.meta !== undefined) data.meta = tool.meta
      s.append('tool/result', data, { surfaceOp: 'append', sourceEventSeqs: [callSeq] })
    }
  }
  if (tool === undefined || tool.result !== undefined) {
    wait(2)
    s.append('step/end', { turn, step })
  }
}

let tokens = 4100
function usage(out, cached = true) {
  tokens += 180 + out
  return { inputTokens: cached ? 240 + (out % 97) : tokens, outputTokens: out, cacheReadTokens: cached ? tokens - 300 : 0, reasoningTokens: Math.round(out * 0.4) }
}

function file(lines) {
  return lines.map((l, i) => `${String(i + 1).padStart(4)}| ${l}`).join('\n')
}

const ORDERS_TS = [
  "import { Router } from 'express'",
  "import { priceCart } from '../services/pricing'",
  "import { loadCart } from '../services/carts'",
  '',
  'export const orders = Router()',
  '',
  "orders.post('/orders', async (req, res) => {",
  '  const cart = await loadCart(req.body.cartId)',
  '  const total = priceCart(cart, req.body.discountCode)',
  '  res.status(201).json({ cartId: cart.id, total })',
  '})',
]

const PRICING_TS = [
  "import type { Cart, Discount } from '../types'",
  "import { DISCOUNTS } from '../generated/discounts'",
  '',
  'export function priceCart(cart: Cart, code?: string): number {',
  '  const subtotal = cart.items.reduce((sum, item) => sum + item.price * item.quantity, 0)',
  '  const discount: Discount | undefined = code ? DISCOUNTS[code] : undefined',
  '  const average = subtotal / cart.items.length',
  '  if (discount && average > discount.minAverage) {',
  '    return round(subtotal * (1 - discount.rate))',
  '  }',
  '  return round(subtotal)',
  '}',
  '',
  'function round(n: number): number {',
  '  return Math.round(n * 100) / 100',
  '}',
]

// ---------------------------------------------------------------- turn 1: the bug

const PLAN = ['find the /orders route and what it calls', 'reproduce the empty-cart 500 with a test', 'fix and run the test suite']

startTurn('POST /orders returns a 500 when the cart is empty (we saw it in staging after the checkout redesign). Find out why and fix it, with a regression test. Keep the change small.')
modelStep({
  headerReason: 'initial',
  reasoning: 'The user reports a 500 from POST /orders for an empty cart. I should plan first: find the route, read the pricing code, reproduce with a test, fix, and run the suite.',
  tool: {
    name: 'todo_write',
    args: { todos: PLAN.map((content, i) => ({ content, status: i === 0 ? 'in_progress' : 'pending' })) },
    during: () => s.append('todo/write', { todos: PLAN.map((content, i) => ({ content, status: i === 0 ? 'in_progress' : 'pending' })) }),
    result: 'Todo list updated (3 items).',
    ms: 4,
  },
  usage: usage(96, false),
})
modelStep({
  reasoning: 'Let me search for the route definition.',
  tool: { name: 'grep', args: { pattern: "'/orders'", path: 'src' }, result: "src/routes/orders.ts:7:orders.post('/orders', async (req, res) => {\nsrc/app.ts:14:app.use('/api', orders)", ms: 120 },
  usage: usage(41),
})
modelStep({
  tool: { name: 'read', args: { file_path: 'src/routes/orders.ts' }, result: `<path>${CWD}/src/routes/orders.ts</path>\n${file(ORDERS_TS)}`, ms: 8 },
  usage: usage(28),
})
modelStep({
  reasoning: 'The route calls priceCart(cart, discountCode). An empty cart probably breaks something in the pricing service. Reading it.',
  tool: { name: 'read', args: { file_path: 'src/services/pricing.ts' }, result: `<path>${CWD}/src/services/pricing.ts</path>\n${file(PRICING_TS)}`, ms: 7 },
  usage: usage(55),
})
modelStep({
  reasoning: 'Found it: `average = subtotal / cart.items.length` is 0/0 = NaN for an empty cart. With a discount code, `NaN > minAverage` is false, so it returns round(0) = 0 ... that is not a 500. Without a discount it also returns 0. So the 500 must come from somewhere else: maybe loadCart throws for an empty cart, or the JSON has NaN. Let me reproduce with a test instead of guessing.',
  text: 'The pricing code divides by the number of items, which is suspicious for an empty cart, but on its own it would return 0, not fail. Let me reproduce it with a test before changing anything.',
  tool: {
    name: 'bash',
    args: { command: "npx vitest run test/orders.test.ts -t 'empty cart'" },
    result: " FAIL  test/orders.test.ts > POST /orders > prices an empty cart\nAssertionError: expected 500 to be 201\n  ❯ test/orders.test.ts:48:29\n\nstderr | RangeError: Invalid discount state: average NaN for cart c_empty\n    at priceCart (src/services/pricing.ts:8:26)\n    at src/routes/orders.ts:9:17\n\n Test Files  1 failed (1)\n      Tests  1 failed | 11 skipped (12)\n   Duration  1.84s",
    ms: 2300,
  },
  usage: usage(164),
})
modelStep({
  reasoning: 'The stack trace shows a RangeError thrown from pricing.ts line 8, but the file I read has no throw there. The generated DISCOUNTS module probably wraps discounts in a Proxy that validates the comparison. Either way the root cause is the NaN average. Guard the empty cart: an empty cart costs 0 and no discount applies.',
  tool: {
    name: 'edit',
    args: { file_path: 'src/services/pricing.ts', old_string: '  const average = subtotal / cart.items.length\n', new_string: '  if (cart.items.length === 0) return 0\n  const average = subtotal / cart.items.length\n' },
    result: `The file ${CWD}/src/services/pricing.ts has been updated successfully.`,
    meta: { diffs: [{ path: 'src/services/pricing.ts', oldText: '  const average = subtotal / cart.items.length', newText: '  if (cart.items.length === 0) return 0\n  const average = subtotal / cart.items.length' }] },
    ms: 6,
  },
  usage: usage(132),
})
modelStep({
  tool: {
    name: 'bash',
    args: { command: 'npx vitest run test/orders.test.ts' },
    result: ' ✓ test/orders.test.ts (12 tests) 212ms\n\n Test Files  1 passed (1)\n      Tests  12 passed (12)\n   Duration  1.71s',
    ms: 2100,
  },
  usage: usage(22),
})
modelStep({
  tool: {
    name: 'todo_write',
    args: { todos: PLAN.map((content) => ({ content, status: 'completed' })) },
    during: () => s.append('todo/write', { todos: PLAN.map((content) => ({ content, status: 'completed' })) }),
    result: 'Todo list updated (3 items, all completed).',
    ms: 4,
  },
  usage: usage(48),
})
modelStep({
  text: 'Fixed. `priceCart` divided the subtotal by the number of items to decide whether a discount applies; for an empty cart that is 0/0 = NaN, and the discount table (generated code) throws a RangeError when it is compared with NaN, which the route turned into a 500.\n\nChange: `src/services/pricing.ts` now returns 0 for an empty cart before computing the average. The existing `prices an empty cart` test in `test/orders.test.ts` reproduced the failure and now passes, along with the other 11 tests in that file.',
  usage: usage(118),
})
endTurn()

// ---------------------------------------------------------------- turn 2: a second test

startTurn('Thanks. Add a test for an empty cart *with* a discount code too, since that is the path that threw.')
modelStep({
  tool: { name: 'read', args: { file_path: 'test/orders.test.ts', offset: 40, limit: 20 }, result: file(['', "  it('prices an empty cart', async () => {", "    const res = await request(app).post('/api/orders').send({ cartId: 'c_empty' })", '    expect(res.status).toBe(201)', '    expect(res.body.total).toBe(0)', '  })', '', "  it('applies SPRING10 to a full cart', async () => {", "    const res = await request(app).post('/api/orders').send({ cartId: 'c_full', discountCode: 'SPRING10' })", '    expect(res.status).toBe(201)', '    expect(res.body.total).toBe(89.1)', '  })', '})']), ms: 5 },
  usage: usage(31),
})
modelStep({
  reasoning: 'Insert a new test after the empty-cart one, using the SPRING10 code on c_empty.',
  tool: {
    name: 'edit',
    args: { file_path: 'test/orders.test.ts', old_string: "  it('applies SPRING10 to a full cart'", new_string: "  it('prices an empty cart with a discount code', async () => {\n    const res = await request(app).post('/api/orders').send({ cartId: 'c_empty', discountCode: 'SPRING10' })\n    expect(res.status).toBe(201)\n    expect(res.body.total).toBe(0)\n  })\n\n  it('applies SPRING10 to a full cart'" },
    result: `The file ${CWD}/test/orders.test.ts has been updated successfully.`,
    ms: 5,
  },
  usage: usage(140),
})
modelStep({
  tool: { name: 'bash', args: { command: 'npm test' }, result: ' ✓ test/carts.test.ts (9 tests) 88ms\n ✓ test/orders.test.ts (13 tests) 230ms\n ✓ test/pricing.test.ts (17 tests) 41ms\n\n Test Files  3 passed (3)\n      Tests  39 passed (39)\n   Duration  2.96s', ms: 3100 },
  usage: usage(19),
})
modelStep({ text: 'Added `prices an empty cart with a discount code` to `test/orders.test.ts`; the whole suite passes (39 tests).', usage: usage(36) })
endTurn()

// ---------------------------------------------------------------- turn 3: outside edit, lint, steering

wait(120_000)
startTurn()
s.append('context/message', { content: [{ type: 'text', text: 'File changed outside the agent: src/services/pricing.ts (formatted by the editor on save).' }], source: { kind: 'plugin', plugin: 'workspace-watcher' }, meta: { paths: ['src/services/pricing.ts'], event: 'change' } }, { surfaceOp: 'append' })
s.append('user/message', { content: [{ type: 'text', text: 'I reformatted pricing.ts. Please run the linter and fix whatever it reports.' }], source: USER }, { surfaceOp: 'append' })
modelStep({
  tool: { name: 'bash', args: { command: 'npm run lint' }, result: `${CWD}/src/services/pricing.ts\n   6:9  warning  'discount' is possibly undefined in a comparison  @typescript-eslint/no-unnecessary-condition\n${CWD}/src/generated/discounts.ts\n  31:3  warning  Unexpected any  @typescript-eslint/no-explicit-any\n\n✖ 2 problems (0 errors, 2 warnings)`, isError: true, errorName: 'CommandFailed', errorCode: 'exit-1', ms: 4200 },
  usage: usage(18),
})
wait(3000)
s.append('steering/message', { turn, content: [{ type: 'text', text: 'Leave src/generated alone, it is regenerated from the price sheet.' }], source: USER }, { surfaceOp: 'append' })
modelStep({
  reasoning: 'The user steers: do not touch src/generated. Only fix the pricing.ts warning; the generated file warning should be excluded in the lint config instead, but I will mention it rather than change the config unasked.',
  tool: {
    name: 'edit',
    args: { file_path: 'src/services/pricing.ts', old_string: '  if (discount && average > discount.minAverage) {', new_string: '  if (discount !== undefined && average > discount.minAverage) {' },
    result: `The file ${CWD}/src/services/pricing.ts has been updated successfully.`,
    ms: 5,
  },
  usage: usage(104),
})
modelStep({
  tool: { name: 'bash', args: { command: 'npm run lint -- src/services src/routes test' }, result: '', ms: 3800 },
  usage: usage(24),
})
modelStep({ text: 'The pricing.ts warning is fixed (an explicit `!== undefined` check). The other warning is in `src/generated/discounts.ts`, which I left alone as you asked; if you want a clean `npm run lint`, that folder could be added to the lint ignore list.', usage: usage(71) })
endTurn()

// ---------------------------------------------------------------- turn 4: compaction, model switch, review

const nodes = [...s.surface.nodes]
// Summarize everything before turn 3 (turns 1 and 2): the first node up to
// the last node of turn 2.
const turn3Start = s.events.findLast((e) => e.type === 'turn/start' && e.data.turn === 3).seq
const shadowed = nodes.filter((n) => n < turn3Start)
wait(60_000)
turn += 1
step = 0
s.append('turn/start', { turn, trigger: { kind: 'message', source: USER } })
s.append(
  'user/message',
  {
    content: [{ type: 'text', text: '<summary>\nEarlier in this session:\n- POST /orders returned 500 for an empty cart: `priceCart` in src/services/pricing.ts computed `subtotal / cart.items.length` (NaN for an empty cart) and the generated discount table threw a RangeError on the NaN comparison.\n- Fix: return 0 early for an empty cart (src/services/pricing.ts). The existing test `prices an empty cart` reproduced it.\n- Added the test `prices an empty cart with a discount code` to test/orders.test.ts. `npm test`: 39 passed.\n</summary>' }],
    source: { kind: 'plugin', plugin: 'compact' },
  },
  { surfaceOp: { op: 'replace', start: shadowed[0], end: shadowed[shadowed.length - 1] }, sourceEventSeqs: shadowed },
)
s.append('user/message', { content: [{ type: 'text', text: 'Switch to the reasoning model and review the whole change for edge cases we missed: negative quantities, a missing cart, discounts on a single item.' }], source: USER }, { surfaceOp: 'append' })
model = 'deepseek-reasoner'
modelStep({
  headerReason: 'change',
  reasoning: 'Review plan: (1) loadCart with an unknown id, (2) quantities <= 0, (3) the average rule with one item. Start with loadCart.',
  tool: { name: 'read', args: { file_path: 'src/services/cart.ts' }, result: `ENOENT: no such file or directory, open '${CWD}/src/services/cart.ts'`, isError: true, errorName: 'FileNotFound', errorCode: 'ENOENT', ms: 3 },
  usage: usage(212, false),
})
modelStep({
  tool: { name: 'read', args: { file_path: 'src/services/carts.ts' }, result: `<path>${CWD}/src/services/carts.ts</path>\n${file(["import { db } from '../db'", "import type { Cart } from '../types'", '', 'export async function loadCart(id: string): Promise<Cart> {', "  const row = await db.one('SELECT * FROM carts WHERE id = $1', [id])", '  return { id: row.id, items: row.items ?? [] }', '}'])}`, ms: 6 },
  usage: usage(44),
})
modelStep({
  reasoning: 'db.one throws when no row matches, so an unknown cart id is still a 500. Quantities are not validated anywhere, so a negative quantity lowers the subtotal. The single-item case is fine: the average is the item price. I will report these rather than change behaviour the user did not ask to change.',
  text: 'Review of the change and the paths around it:\n\n1. **Missing cart** (`cartId` unknown): `loadCart` uses `db.one`, which throws, so the route still answers 500. It should answer 404; this predates our change.\n2. **Negative or zero quantities**: nothing validates `quantity`, so `[{price: 10, quantity: -3}]` prices at -30. Worth rejecting with 400 in the route.\n3. **Single item with a discount**: fine. The average equals the item price, so `minAverage` works as intended.\n4. **Empty cart** (our fix): returns 0 before the average; covered by two tests now.\n\nWant me to fix 1 and 2 (404 for a missing cart, 400 for quantities below 1) with tests?',
  usage: usage(388),
})
endTurn()

// ---------------------------------------------------------------- turn 5: fix the findings and commit

startTurn('Yes, fix 1 and 2 with tests, then commit everything with a descriptive message.')
modelStep({
  tool: {
    name: 'edit',
    args: { file_path: 'src/services/carts.ts', old_string: "  const row = await db.one('SELECT * FROM carts WHERE id = $1', [id])", new_string: "  const row = await db.oneOrNone('SELECT * FROM carts WHERE id = $1', [id])\n  if (row === null) throw new NotFoundError(`cart ${id} not found`)" },
    result: `The file ${CWD}/src/services/carts.ts has been updated successfully.`,
    ms: 5,
  },
  usage: usage(120),
})
modelStep({
  tool: {
    name: 'edit',
    args: { file_path: 'src/routes/orders.ts', old_string: '  const cart = await loadCart(req.body.cartId)\n', new_string: "  const cart = await loadCart(req.body.cartId)\n  if (cart.items.some((item) => item.quantity < 1)) {\n    return res.status(400).json({ error: 'every item needs a quantity of at least 1' })\n  }\n" },
    result: `The file ${CWD}/src/routes/orders.ts has been updated successfully.`,
    ms: 5,
  },
  usage: usage(151),
})
modelStep({
  tool: {
    name: 'edit',
    args: { file_path: 'test/orders.test.ts', old_string: "  it('applies SPRING10 to a full cart'", new_string: "  it('answers 404 for a missing cart', async () => {\n    const res = await request(app).post('/api/orders').send({ cartId: 'c_missing' })\n    expect(res.status).toBe(404)\n  })\n\n  it('rejects a quantity below 1', async () => {\n    const res = await request(app).post('/api/orders').send({ cartId: 'c_negative' })\n    expect(res.status).toBe(400)\n  })\n\n  it('applies SPRING10 to a full cart'" },
    result: `The file ${CWD}/test/orders.test.ts has been updated successfully.`,
    ms: 5,
  },
  usage: usage(176),
})
modelStep({
  tool: { name: 'bash', args: { command: 'npm test' }, result: ' ✓ test/carts.test.ts (9 tests) 90ms\n ✓ test/orders.test.ts (15 tests) 251ms\n ✓ test/pricing.test.ts (17 tests) 40ms\n\n Test Files  3 passed (3)\n      Tests  41 passed (41)\n   Duration  3.02s', ms: 3200 },
  usage: usage(20),
})
// The crash example is cut inside this step: the commit ran, its result was never logged.
const crashAfter = s.seq
modelStep({
  tool: { name: 'bash', args: { command: "git add -A && git commit -m 'orders: price empty carts, 404 for missing carts, 400 for quantities below 1'" }, result: '[fix/empty-cart 3f9c2e1] orders: price empty carts, 404 for missing carts, 400 for quantities below 1\n 5 files changed, 38 insertions(+), 4 deletions(-)', ms: 240 },
  usage: usage(58),
})
modelStep({ text: 'Done, committed as 3f9c2e1 on `fix/empty-cart`:\n\n- `priceCart` returns 0 for an empty cart (the original 500).\n- `loadCart` throws `NotFoundError` for an unknown id, so POST /orders answers 404.\n- POST /orders answers 400 when an item has a quantity below 1.\n- Four tests cover these; `npm test` passes (41 tests).', usage: usage(97) })
endTurn()

Date.now = realNow

// ---------------------------------------------------------------- write

const dir = path.join(root, 'examples')
const text = s.toJsonl()
fs.writeFileSync(path.join(dir, 'session.jsonl'), text)

// The crash: every line up to the tool/call of the commit step, then the
// first bytes of the next line (a write the crash cut short).
const lines = text.split('\n')
const callLine = lines.findIndex((l, i) => i > crashAfter && l.includes('"type":"tool/call"'))
const torn = lines[callLine + 1].slice(0, 57)
fs.writeFileSync(path.join(dir, 'interrupted.jsonl'), `${lines.slice(0, callLine + 1).join('\n')}\n${torn}`)
console.log(`examples/session.jsonl: ${s.seq} events, ${turn} turns, surface ${s.surface.nodes.length} nodes`)
console.log(`examples/interrupted.jsonl: ${callLine} events, then a torn line`)
