// PUB 2.5: a plugin augments `<package>/types` the way upstream's packages do.
// (The package is installed under upstream's name, `npm:dsh-session-native-published@…`.)
export {}
declare module '@deepseek-ai/dsh-session/types' {
  interface SessionEventMap {
    'x/plugin': { value: number }
  }
  interface TurnEndReasonMap {
    'x-reason': { kind: 'x-reason'; detail: string }
  }
}
