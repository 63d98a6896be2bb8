// PUB 2.4: the 48 event types the published line knows. Session never reads
// it; the persistence loaders compare event types (and `ignorable`) with it.
// Typed ReadonlySet; at run time an ordinary Set.
export const KNOWN_SESSION_EVENT_TYPES = new Set([
  'agent-preset/selected', 'agent/inbox/spliced', 'approval/asked', 'approval/decided',
  'approval/policy', 'assistant/chunk', 'assistant/message', 'command/done', 'command/run',
  'compaction/end', 'compaction/prune', 'compaction/start', 'compaction/summary',
  'feedback/record', 'goal/change', 'hook/invoked', 'hook/result', 'llm/retry',
  'llm/retry-started', 'permission/preset', 'plan/mode', 'request/context', 'request/header',
  'sandbox/mode', 'schedule/change', 'session/end-seed', 'session/title',
  'session/title-llm-request', 'step/end', 'step/start', 'subagent/descriptor', 'team/member',
  'team/message/delivered', 'team/message/queued', 'team/task', 'todo/write',
  'tool-workflow/agent-end', 'tool-workflow/agent-start', 'tool-workflow/run-end',
  'tool-workflow/run-start', 'tool/call', 'tool/code-dispatch', 'tool/code-dispatch-start',
  'tool/result', 'turn/end', 'turn/start', 'user/message', 'web/deepseek-search-llm-request',
])
