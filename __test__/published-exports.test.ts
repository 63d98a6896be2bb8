// PUB 13: the value exports that lib/index.d.ts declares are exactly the
// reference 0.1.1-rc.2 root's run-time exports (25 names plus default), and
// ./types, ./surface, ./invariant likewise. Read with the TypeScript checker,
// so the declarations themselves are what is compared.
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
// @ts-ignore -- the reference's own declarations import .ts paths
import * as refRoot from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/index.js'
// @ts-ignore
import * as refTypes from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/types/types.js'
// @ts-ignore
import * as refSurface from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/types/surface.js'
// @ts-ignore
import * as refInvariant from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/invariant.js'

const ts = createRequire(import.meta.url)('typescript') as typeof import('typescript')

function declaredExports(file: string): { values: string[]; types: string[] } {
  const path = fileURLToPath(new URL(`../published/lib/${file}`, import.meta.url))
  const peers = fileURLToPath(new URL('../test-published/node_modules/@deepseek-ai/', import.meta.url))
  const paths: Record<string, string[]> = {}
  for (const p of ['cordis', 'dsh-llm', 'dsh-brand', 'dsh-typert-protocol', 'dsh-scope', 'dsh-invariants']) paths[`@deepseek-ai/${p}`] = [`${peers}${p}/lib/types/index.d.ts`]
  const program = ts.createProgram([path], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noEmit: true, skipLibCheck: true, paths })
  const checker = program.getTypeChecker()
  const symbol = checker.getSymbolAtLocation(program.getSourceFile(path)!)!
  const values: string[] = []
  const types: string[] = []
  for (const s of checker.getExportsOfModule(symbol)) {
    const target = s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s
    const flags = target.flags
    expect(flags & ts.SymbolFlags.Alias, `${s.name} resolves`).toBe(0)
    const typeOnly = (s.declarations ?? []).some(d => ts.isExportSpecifier(d) && (d.isTypeOnly || d.parent.parent.isTypeOnly))
    if (flags & ts.SymbolFlags.Value && !typeOnly) values.push(s.name)
    if (flags & ts.SymbolFlags.Type) types.push(s.name)
  }
  return { values: values.sort(), types: types.sort() }
}

describe('PUB 13 exports', () => {
  it('PUB 13: the root declares exactly the reference root\'s value exports', () => {
    const { values, types } = declaredExports('index.d.ts')
    expect(values).toEqual(Object.keys(refRoot).sort())
    expect(values).toHaveLength(26)
    for (const t of ['SessionPreparationOptions', 'AssistantMessage', 'ToolResultMessage', 'UserMessage', 'JsonValue', 'ChunkRow',
      'StorageRecord', 'SessionSurface', 'SurfaceFoldReplacement', 'SurfaceFoldResult', 'SessionForkSource', 'SessionForkErrorCode',
      'SessionHeader', 'CreateSessionOptions', 'RestoredSessionOptions', 'PrepareSessionOptions', 'AgentCancelCause',
      'TurnEndCancelCause', 'TurnEndReasonMap', 'TurnEndReason', 'TodoItem', 'EpochHeader', 'RequestContext', 'RequestHeaderReason',
      'SessionEventMap', 'SessionEventType', 'SurfaceEventType', 'SurfaceEvent', 'SurfaceOp', 'SurfaceIntent', 'SessionEvent', 'SessionId']) {
      expect(types).toContain(t)
    }
    expect(values).not.toContain('SurfaceManager')
    expect(values).not.toContain('renderContextContent')
  })
  it('PUB 13.1-13.3: ./types, ./surface and ./invariant declare the reference\'s value exports', () => {
    expect(declaredExports('types.d.ts').values).toEqual(Object.keys(refTypes).sort())
    expect(declaredExports('surface.d.ts').values).toEqual(Object.keys(refSurface).sort())
    expect(declaredExports('invariant.d.ts').values).toEqual(Object.keys(refInvariant).sort())
    expect(declaredExports('surface.d.ts').types).toEqual(expect.arrayContaining(['SurfaceFoldReplacement', 'SurfaceFoldResult', 'SessionSurface']))
  })
})
