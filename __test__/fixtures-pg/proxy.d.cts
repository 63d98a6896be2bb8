// Types of proxy.cjs (a TCP proxy that loses a COMMIT or its answer).
export interface Proxy {
  port: number
  arm(mode: 'answer-lost' | 'answer-late' | 'commit-lost'): Promise<void>
  close(): Promise<void>
}
export function startProxy(targetPort: number, targetHost?: string): Promise<Proxy>
