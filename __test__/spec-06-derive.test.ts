import { describe, expect, it } from 'vitest'
import { deriveEventMessage, renderContextContent, Session, type SessionEvent } from '../index.js'
import { basicLog, isDeepFrozen, newSession, PROV, sessionWithUsers, text, USER } from './spec-helpers.js'

function event(type: string, data: unknown, surfaceOp: unknown = 'append'): SessionEvent {
  return { type, seq: 0, time: 1, data, surfaceOp } as never
}

const image = { type: 'image', url: 'https://example.invalid/a.png', detail: { w: 1 } }

describe('SPEC 6 deriveEventMessage', () => {
  it('user/message -> {role: user, content}', () => {
    expect(deriveEventMessage(event('user/message', { content: [...text('hi'), image], source: USER }))).toStrictEqual({
      role: 'user',
      content: [...text('hi'), image],
    })
  })

  it('assistant/message -> {role: assistant, content, provenance}, without usage', () => {
    const provenance = { ...PROV, replay: { id: 'r1' } }
    const content = [
      { type: 'reasoning', text: 'think' },
      ...text('answer'),
      { type: 'tool-call', id: 'c1', name: 'read', arguments: '{"p":1}' },
    ]
    expect(
      deriveEventMessage(event('assistant/message', { turn: 1, step: 1, content, provenance, usage: { inputTokens: 3 } })),
    ).toStrictEqual({ role: 'assistant', content, provenance })
  })

  it('assistant/message with empty content -> no message', () => {
    expect(deriveEventMessage(event('assistant/message', { turn: 1, step: 1, content: [], provenance: PROV, usage: {} }))).toBeNull()
  })

  it('tool/result -> a user message with one tool-result block; error and meta stay out', () => {
    const data = {
      turn: 1,
      step: 1,
      callId: 'c1',
      content: text('out'),
      isError: true,
      error: { name: 'E', code: 'x' },
      meta: { secret: 1 },
    }
    expect(deriveEventMessage(event('tool/result', data))).toStrictEqual({
      role: 'user',
      content: [{ type: 'tool-result', toolCallId: 'c1', content: text('out'), isError: true }],
    })
  })

  it('context/message -> the blocks wrapped in <context source="KIND">', () => {
    const data = { content: [...text('a'), image], source: { kind: 'plugin', plugin: 'w' } }
    expect(deriveEventMessage(event('context/message', data))).toStrictEqual({
      role: 'user',
      content: [{ type: 'text', text: '<context source="plugin">' }, ...text('a'), image, { type: 'text', text: '</context>' }],
    })
  })

  it('context/message with envelope "context" is wrapped too', () => {
    const data = { content: text('a'), source: { kind: 'cron' }, envelope: 'context' }
    expect(deriveEventMessage(event('context/message', data))).toStrictEqual({
      role: 'user',
      content: [{ type: 'text', text: '<context source="cron">' }, ...text('a'), { type: 'text', text: '</context>' }],
    })
  })

  it('JSON-quotes the kind', () => {
    const data = { content: text('a'), source: { kind: 'we"ird\\kind\n' } }
    const message = deriveEventMessage(event('context/message', data))!
    expect(message.content[0]).toEqual({ type: 'text', text: `<context source=${JSON.stringify('we"ird\\kind\n')}>` })
    expect(message.content[0]).toEqual({ type: 'text', text: '<context source="we\\"ird\\\\kind\\n">' })
  })

  it('context/message with envelope "raw" -> the blocks alone', () => {
    const data = { content: [...text('<system-reminder>x</system-reminder>'), image], source: { kind: 'plugin' }, envelope: 'raw' }
    expect(deriveEventMessage(event('context/message', data))).toStrictEqual({
      role: 'user',
      content: [...text('<system-reminder>x</system-reminder>'), image],
    })
  })

  it('never lets meta reach the message', () => {
    const meta = { leak: 'META-LEAK', n: 1 }
    for (const envelope of [undefined, 'context', 'raw']) {
      const data = { content: text('a'), source: { kind: 'k' }, meta, ...(envelope ? { envelope } : {}) }
      const message = deriveEventMessage(event('context/message', data))
      expect(JSON.stringify(message)).not.toContain('META-LEAK')
      expect(Object.keys(message!).sort()).toEqual(['content', 'role'])
    }
  })

  it('steering/message -> the blocks wrapped in <steering source="KIND">', () => {
    const data = { turn: 2, content: text('focus'), source: { kind: 'user' } }
    expect(deriveEventMessage(event('steering/message', data))).toStrictEqual({
      role: 'user',
      content: [{ type: 'text', text: '<steering source="user">' }, ...text('focus'), { type: 'text', text: '</steering>' }],
    })
  })

  it('wraps an empty context message as the two tags', () => {
    expect(deriveEventMessage(event('context/message', { content: [], source: { kind: 'k' } }))).toStrictEqual({
      role: 'user',
      content: [
        { type: 'text', text: '<context source="k">' },
        { type: 'text', text: '</context>' },
      ],
    })
  })

  it.each([
    ['turn/start', { turn: 1, trigger: { kind: 'message', source: USER } }],
    ['turn/end', { turn: 1, reason: { kind: 'completed' } }],
    ['step/start', { turn: 1, step: 1 }],
    ['prompt/blocked', { content: text('rm'), source: USER, reason: 'policy' }],
    ['assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', text: 'x' } }],
    ['tool/call', { turn: 1, step: 1, callId: 'c', name: 'n', arguments: '{}' }],
    ['todo/write', { todos: [] }],
    ['request/header', { header: { config: PROV }, reason: 'initial' }],
    ['plugin/ping', { content: text('x'), source: USER }],
  ])('%s -> null', (type, data) => {
    expect(deriveEventMessage(event(type, data, undefined))).toBeNull()
  })

  it('is the same on the session', () => {
    const s = newSession('s', basicLog())
    for (const e of s.events) expect(s.deriveEventMessage(e)).toEqual(deriveEventMessage(e))
  })
})

describe('SPEC 6 renderContextContent', () => {
  it('wraps by default', () => {
    expect(renderContextContent(text('x'), { kind: 'k' })).toEqual([
      { type: 'text', text: '<context source="k">' },
      ...text('x'),
      { type: 'text', text: '</context>' },
    ])
  })

  it('wraps with envelope "context"', () => {
    expect(renderContextContent(text('x'), { kind: 'a"b' }, 'context')).toEqual([
      { type: 'text', text: '<context source="a\\"b">' },
      ...text('x'),
      { type: 'text', text: '</context>' },
    ])
  })

  it('returns the blocks alone with envelope "raw"', () => {
    expect(renderContextContent([...text('x'), image as never], { kind: 'k' }, 'raw')).toEqual([...text('x'), image])
  })

  it('does not modify its input', () => {
    const content = text('x')
    renderContextContent(content, { kind: 'k' })
    expect(content).toEqual(text('x'))
  })
})

describe('SPEC 6 deriveMessages', () => {
  it('projects every surface node in order', () => {
    const s = newSession('s', basicLog())
    expect(s.deriveMessages()).toEqual([
      { role: 'user', content: text('q1') },
      {
        role: 'assistant',
        content: [...text('a1'), { type: 'tool-call', id: 'c1', name: 'read', arguments: '{"path":"a"}' }],
        provenance: PROV,
      },
      { role: 'user', content: [{ type: 'tool-result', toolCallId: 'c1', content: text('r1'), isError: false }] },
      { role: 'assistant', content: text('a2'), provenance: PROV },
      {
        role: 'user',
        content: [{ type: 'text', text: '<context source="cron">' }, ...text('tick'), { type: 'text', text: '</context>' }],
      },
    ])
  })

  it('skips an assistant message with empty content', () => {
    const s = sessionWithUsers(1)
    s.append('assistant/message', { turn: 1, step: 1, content: [], provenance: PROV, usage: { outputTokens: 0 } }, {
      surfaceOp: 'append',
      sourceEventSeqs: [],
    })
    expect(s.surface.nodes).toEqual([1, 2])
    expect(s.deriveMessages()).toEqual([{ role: 'user', content: text('u0') }])
  })

  it('returns a fresh array each call over the same message objects', () => {
    const s = newSession('s', basicLog())
    const a = s.deriveMessages()
    const b = s.deriveMessages()
    expect(b).not.toBe(a)
    expect(b).toEqual(a)
    a.forEach((m, i) => expect(b[i]).toBe(m))
  })

  it('lets the caller change the returned array without touching the session', () => {
    const s = newSession('s', basicLog())
    const a = s.deriveMessages()
    a.pop()
    a.push({ role: 'user', content: text('injected') })
    expect(s.deriveMessages()).toHaveLength(5)
    expect(s.deriveMessages().at(-1)).not.toEqual({ role: 'user', content: text('injected') })
  })

  it('hands out deep-frozen messages', () => {
    const s = newSession('s', basicLog())
    for (const m of s.deriveMessages()) expect(isDeepFrozen(m)).toBe(true)
    const m = s.deriveMessages()[0]
    expect(() => {
      ;(m.content as unknown[]).push(1)
    }).toThrow(TypeError)
  })

  it('keeps earlier message objects when new nodes are appended', () => {
    const s = sessionWithUsers(2)
    const a = s.deriveMessages()
    s.append('user/message', { content: text('u2'), source: USER }, { surfaceOp: 'append' })
    const b = s.deriveMessages()
    expect(b).toHaveLength(3)
    expect(b[0]).toBe(a[0])
    expect(b[1]).toBe(a[1])
    expect(b[2]).toEqual({ role: 'user', content: text('u2') })
  })

  it('ignores log-only events', () => {
    const s = sessionWithUsers(1)
    const a = s.deriveMessages()
    s.append('step/start', { turn: 1, step: 1 })
    s.append('prompt/blocked', { content: text('no'), source: USER, reason: 'policy' })
    expect(s.deriveMessages()).toEqual(a)
  })

  it('rebuilds after a replace: shadowed events leave the history', () => {
    const s = sessionWithUsers(4)
    expect(s.deriveMessages()).toHaveLength(4)
    s.append('context/message', { content: text('summary of u1 u2'), source: { kind: 'compaction' } }, {
      surfaceOp: { op: 'replace', start: 2, end: 3 },
      sourceEventSeqs: [2, 3],
    })
    expect(s.deriveMessages()).toEqual([
      { role: 'user', content: text('u0') },
      {
        role: 'user',
        content: [
          { type: 'text', text: '<context source="compaction">' },
          ...text('summary of u1 u2'),
          { type: 'text', text: '</context>' },
        ],
      },
      { role: 'user', content: text('u3') },
    ])
    s.append('user/message', { content: text('u4'), source: USER }, { surfaceOp: 'append' })
    expect(s.deriveMessages().map((m) => (m.content[m.content.length === 1 ? 0 : 1] as { text: string }).text)).toEqual([
      'u0',
      'summary of u1 u2',
      'u3',
      'u4',
    ])
  })

  it('rebuilds after a replace that trims one tool result in place', () => {
    const s = newSession('s', basicLog())
    s.append('turn/start', { turn: 3, trigger: { kind: 'message', source: USER } })
    s.append('tool/result', { turn: 1, step: 1, callId: 'c1', content: text('[trimmed]'), isError: false }, {
      surfaceOp: { op: 'replace', start: 6, end: 6 },
      sourceEventSeqs: [6],
    })
    const messages = s.deriveMessages()
    expect(messages).toHaveLength(5)
    expect(messages[2]).toEqual({
      role: 'user',
      content: [{ type: 'tool-result', toolCallId: 'c1', content: text('[trimmed]'), isError: false }],
    })
  })

  it('matches a fresh seeded session at every step', () => {
    const s = new Session('s')
    const steps: (() => void)[] = [
      () => s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } }),
      () => s.append('user/message', { content: text('a'), source: USER }, { surfaceOp: 'append' }),
      () => s.append('context/message', { content: text('b'), source: { kind: 'x' }, envelope: 'raw' }, { surfaceOp: 'append' }),
      () =>
        s.append('context/message', { content: text('c'), source: { kind: 'y' } }, {
          surfaceOp: { op: 'replace', start: 1, end: 2 },
          sourceEventSeqs: [1, 2],
        }),
      () => s.append('steering/message', { turn: 1, content: text('d'), source: USER }, { surfaceOp: 'append' }),
    ]
    for (const step of steps) {
      step()
      expect(s.deriveMessages()).toEqual(new Session('copy', s.events).deriveMessages())
    }
  })
})
