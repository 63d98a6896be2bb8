// Deterministic workload generator for benchmark/published.mjs: the agent loop
// of ../shared/bench/workload.mjs (the v0 benchmark's) spoken in the published
// line's vocabulary (docs/PUBLISHED.md, PUB 2.1):
//
//   turn/start {turn}
//   user/message                    the message itself: {id, role:'user', content, source:{kind:'user'}}   surfaceOp append
//   per step (stepsPerTurn, all but the last call one tool):
//     [loop: deriveMessages() before step/start; requestHeader() after it]
//     step/start {turn, step}
//     request/header                ~12 KB {header:{config, system, tools}, reason}; 'initial' once, then
//                                   'change' every headerChangeEvery turns (step 1)
//     request/context               {provider, model, contextWindow}: with the first header and whenever
//                                   the route changes (every contextChangeEvery turns, step 1)
//     assistant/chunk x ~40-54      block-start / reasoning-delta / text-delta (~20 chars) /
//                                   tool-call-delta / block-end / usage / finish
//     assistant/message             {turn, step, message:{id, role:'assistant', content, source:{kind:'model',
//                                   provider, model}}, usage}; surfaceOp append, sourceEventSeqs = the step's chunks
//     tool/call                     {turn, step, callId, name, arguments}                    (tool steps)
//     tool/result                   {turn, step, message:{id, role:'user', source:{kind:'tool', callId},
//                                   content:[{type:'tool-result', toolCallId, content:[text ~2 KB], isError}]}}
//                                   surfaceOp append, sourceEventSeqs = [tool/call seq]
//     step/end {turn, step}
//   turn/end {turn, reason:{kind:'completed'}}
//
// Every string comes from a seeded PRNG (mulberry32, as workload.mjs), so the
// derived messages, and their hash, are the same for every correct
// implementation. Every reference points backwards: any prefix is a valid log.

export const DEFAULTS = Object.freeze({
  seed: 0x5eed,
  stepsPerTurn: 4, // 3 tool steps + 1 final answer step
  reasoningDeltas: 10,
  textDeltas: 30,
  argDeltas: 6,
  deltaChars: 20,
  userChars: 300,
  toolResultChars: 2048,
  headerChangeEvery: 25, // turns between request/header 'change' snapshots
  contextChangeEvery: 40, // turns between route changes (request/context)
  systemChars: 6000,
  tools: 12,
  reasoningBlock: true,
})

export const PROVIDER = 'deepseek'
const MODELS = ['deepseek-chat', 'deepseek-reasoner']

/** mulberry32 PRNG. */
export function rng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const WORDS = (
  'the of and to in is that for it as with was on be by this are at from or an have not which but ' +
  'function const return import export class interface type async await session event surface node message ' +
  'append replace derive seed replay header tool result call chunk stream provider model config token usage ' +
  'file path line error test build run check value index array object string number boolean null undefined ' +
  'src lib package json module promise resolve reject throw catch finally if else for while switch case break'
).split(' ')

function textOf(next, chars) {
  let out = ''
  while (out.length < chars) {
    out += WORDS[Math.floor(next() * WORDS.length)]
    out += next() < 0.1 ? '\n' : ' '
  }
  return out.slice(0, chars)
}

function split(text, parts) {
  const size = Math.ceil(text.length / parts)
  const out = []
  for (let i = 0; i < parts; i++) out.push(text.slice(i * size, (i + 1) * size))
  return out
}

function makeHeader(next, p, revision, model) {
  const tools = []
  for (let i = 0; i < p.tools; i++) {
    tools.push({
      name: `tool_${i}`,
      description: textOf(next, 240),
      inputSchema: {
        type: 'object',
        properties: {
          path: { type: 'string', description: textOf(next, 60) },
          content: { type: 'string', description: textOf(next, 60) },
          limit: { type: 'number', description: textOf(next, 40) },
        },
        required: ['path'],
      },
    })
  }
  return {
    config: { provider: PROVIDER, model, temperature: revision % 2 === 0 ? 0.7 : 0.6, maxTokens: 8192 },
    system: textOf(next, p.systemChars),
    tools,
  }
}

/**
 * Exactly `n` append operations (the last turn may be cut short).
 * @returns {{ ops: {type:string,data:object,opts?:object}[], stepStarts: number[], turns: number, surfaceNodes: number }}
 *   `stepStarts`: the op indexes of every step/start (where the loop derives its history).
 */
export function generateOps(n, params = {}) {
  const p = { ...DEFAULTS, ...params }
  const next = rng(p.seed)
  const ops = []
  const stepStarts = []
  let surfaceNodes = 0
  const push = (type, data, opts) => {
    if (ops.length >= n) return -1
    ops.push(opts === undefined ? { type, data } : { type, data, opts })
    if (opts !== undefined) surfaceNodes += 1
    return ops.length - 1
  }
  let turn = 0
  let headerRevision = 0
  let route = 0
  let callCounter = 0
  outer: while (ops.length < n) {
    turn += 1
    push('turn/start', { turn })
    push(
      'user/message',
      { id: `msg_u${turn}`, role: 'user', content: [{ type: 'text', text: textOf(next, p.userChars) }], source: { kind: 'user' } },
      { surfaceOp: 'append' },
    )
    for (let step = 1; step <= p.stepsPerTurn; step++) {
      if (ops.length >= n) break outer
      stepStarts.push(ops.length)
      push('step/start', { turn, step })
      const routeChange = step === 1 && turn > 1 && turn % p.contextChangeEvery === 0
      if (routeChange) route += 1
      const model = MODELS[route % MODELS.length]
      if (turn === 1 && step === 1) {
        push('request/header', { header: makeHeader(next, p, headerRevision, model), reason: 'initial' })
      } else if (step === 1 && (turn % p.headerChangeEvery === 0 || routeChange)) {
        headerRevision += 1
        push('request/header', { header: makeHeader(next, p, headerRevision, model), reason: 'change' })
      }
      if ((turn === 1 && step === 1) || routeChange) {
        push('request/context', { provider: PROVIDER, model, contextWindow: route % 2 === 0 ? 128000 : 64000 })
      }
      const toolStep = step < p.stepsPerTurn
      const chunkSeqs = []
      const chunk = (c) => {
        const seq = push('assistant/chunk', { turn, step, chunk: c })
        if (seq >= 0) chunkSeqs.push(seq)
      }
      const content = []
      let index = 0
      if (p.reasoningBlock) {
        const reasoning = textOf(next, p.reasoningDeltas * p.deltaChars)
        chunk({ type: 'block-start', index, blockType: 'reasoning' })
        for (const d of split(reasoning, p.reasoningDeltas)) chunk({ type: 'reasoning-delta', index, text: d })
        chunk({ type: 'block-end', index, block: { type: 'reasoning', text: reasoning } })
        content.push({ type: 'reasoning', text: reasoning })
        index += 1
      }
      const text = textOf(next, p.textDeltas * p.deltaChars)
      chunk({ type: 'block-start', index, blockType: 'text' })
      for (const d of split(text, p.textDeltas)) chunk({ type: 'text-delta', index, text: d })
      chunk({ type: 'block-end', index, block: { type: 'text', text } })
      content.push({ type: 'text', text })
      index += 1
      let call
      if (toolStep) {
        callCounter += 1
        const id = `call_${turn}_${step}_${callCounter.toString(36)}`
        const name = `tool_${callCounter % p.tools}`
        const args = JSON.stringify({
          path: `src/${textOf(next, 24).replace(/\s+/g, '_')}.ts`,
          limit: 200,
          content: textOf(next, Math.max(0, p.argDeltas * p.deltaChars - 80)),
        })
        chunk({ type: 'block-start', index, blockType: 'tool-call' })
        split(args, p.argDeltas).forEach((d, i) =>
          chunk(i === 0 ? { type: 'tool-call-delta', index, id, name, argumentsDelta: d } : { type: 'tool-call-delta', index, id, argumentsDelta: d }),
        )
        call = { type: 'tool-call', id, name, arguments: args }
        chunk({ type: 'block-end', index, block: call })
        content.push(call)
      }
      const usage = {
        inputTokens: 1000 + Math.floor(next() * 5000),
        outputTokens: 100 + Math.floor(next() * 900),
        cacheReadTokens: Math.floor(next() * 40000),
      }
      chunk({ type: 'usage', usage })
      chunk({ type: 'finish', reason: { kind: toolStep ? 'tool-calls' : 'stop' } })
      push(
        'assistant/message',
        {
          turn,
          step,
          message: { id: `msg_a${turn}_${step}`, role: 'assistant', content, source: { kind: 'model', provider: PROVIDER, model } },
          usage,
        },
        { surfaceOp: 'append', sourceEventSeqs: chunkSeqs },
      )
      if (toolStep) {
        const callSeq = push('tool/call', { turn, step, callId: call.id, name: call.name, arguments: call.arguments })
        if (callSeq >= 0) {
          push(
            'tool/result',
            {
              turn,
              step,
              message: {
                id: `msg_t${turn}_${step}`,
                role: 'user',
                source: { kind: 'tool', callId: call.id },
                content: [{ type: 'tool-result', toolCallId: call.id, content: [{ type: 'text', text: textOf(next, p.toolResultChars) }], isError: false }],
              },
            },
            { surfaceOp: 'append', sourceEventSeqs: [callSeq] },
          )
        }
      }
      push('step/end', { turn, step })
    }
    push('turn/end', { turn, reason: { kind: 'completed' } })
  }
  return { ops, stepStarts, turns: turn, surfaceNodes }
}

/**
 * The ops as a stored log (what a persistence backend holds): plain, unfrozen
 * events with contiguous seq and rising time, keys in an appended event's
 * order (PUB 1).
 */
export function toEvents(ops, t0 = 1_700_000_000_000) {
  const events = new Array(ops.length)
  for (let i = 0; i < ops.length; i++) {
    const { type, data, opts } = ops[i]
    const event = { type, seq: i, time: t0 + i, data }
    if (opts !== undefined) {
      if (opts.sourceEventSeqs !== undefined) event.sourceEventSeqs = opts.sourceEventSeqs
      event.surfaceOp = opts.surfaceOp
    }
    events[i] = event
  }
  return events
}

/** The session header a restore hands over with the events (PUB 4.4). */
export function storedHeader(id, createdAt = 1_700_000_000_000) {
  return { version: 0, id, createdAt }
}
