import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    // A native addon can take down a worker thread pool; run test files in processes.
    pool: 'forks',
    include: ['__test__/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    typecheck: {
      enabled: true,
      include: ['__test__/**/*.test-d.ts'],
      tsconfig: './tsconfig.json',
    },
  },
})
