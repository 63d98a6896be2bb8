// Types of server.cjs (a throwaway PostgreSQL server of one test's own).
export interface Server {
  dir: string
  port: number
  url(params?: Record<string, string>, host?: string): string
  signal(sig: NodeJS.Signals): void
  log(): string
  stop(): void
}
export function available(): boolean
export function startServer(options?: {
  settings?: Record<string, string | number>
  hba?: string[]
  files?: Record<string, string>
}): Promise<Server>
