'use strict'
// Event builders shared by the store tests and the crash-test writer, and
// the seeded random numbers both draw from (plain CommonJS so a child
// process can load it without a compiler).

const T0 = 1_760_000_000_000
const USER = { kind: 'user' }
const PROV = { provider: 'deepseek', model: 'deepseek-chat' }

/**
 * One tool-using turn starting at `seq`, as three batches: the prompt, the
 * model's tool call, and the result with the turn's end.
 */
function turnBatches(turn, seq, text = `question ${turn}`) {
  let s = seq
  const ev = (type, data, extra = {}) => {
    const e = { type, seq: s, time: T0 + s, data, ...extra }
    s += 1
    return e
  }
  const callId = `call-${turn}`
  const prompt = [
    ev('turn/start', { turn, trigger: { kind: 'message', source: USER } }),
    ev('user/message', { content: [{ type: 'text', text }], source: USER }, { surfaceOp: 'append' }),
  ]
  const stepStart = ev('step/start', { turn, step: 1 })
  const chunk = ev('assistant/chunk', { turn, step: 1, chunk: { type: 'text-delta', index: 0, text: 'ok' } })
  const message = ev(
    'assistant/message',
    {
      turn,
      step: 1,
      content: [{ type: 'text', text: 'ok' }, { type: 'tool-call', id: callId, name: 'read', arguments: '{"path":"a"}' }],
      provenance: PROV,
    },
    { sourceEventSeqs: [chunk.seq], surfaceOp: 'append' },
  )
  const call = ev('tool/call', { turn, step: 1, callId, name: 'read', arguments: '{"path":"a"}' })
  const result = ev(
    'tool/result',
    { turn, step: 1, callId, content: [{ type: 'text', text: `result ${turn}` }], isError: false },
    { sourceEventSeqs: [call.seq], surfaceOp: 'append' },
  )
  const stepEnd = ev('step/end', { turn, step: 1 })
  const end = ev('turn/end', { turn, reason: { kind: 'completed' } })
  return [prompt, [stepStart, chunk, message, call], [result, stepEnd, end]]
}

/** mulberry32: the same numbers for the same seed on every run. */
function rng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

module.exports = { T0, turnBatches, rng }
