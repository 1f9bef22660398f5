// @platformatic/kafka driver of the fail-over matrix: a KIP-848 consumer of
// one topic in a group, printing its assignment's changes as JSON lines
// until SIGTERM. Usage: node platformatic_driver.mjs BROKERS GROUP TOPIC.
// The client has no assignment callbacks: the driver watches its public
// assignments every 50 ms and reports partitions added as assigned and
// partitions taken away as revoked, or as lost when the last heartbeat
// failed with FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID (the client then
// drops everything and joins again). The client settings are
// docs/FAILOVER.md's: maxWaitTime 1 s, below the request timeout.
import { Consumer } from '@platformatic/kafka'
import { emit } from './events.mjs'

const [brokers, groupId, topic] = process.argv.slice(2)
const consumer = new Consumer({
  clientId: 'tenure-interop',
  bootstrapBrokers: brokers.split(','),
  groupId,
  groupProtocol: 'consumer',
  maxWaitTime: 1000,
  autocommit: false
})
let owned = new Set()
let fenced = false
consumer.on('consumer:heartbeat:error', ({ error }) => {
  const code = error?.response?.errorCode
  if (code === 110 || code === 25) fenced = true
  emit('error', [], `heartbeat: ${error?.message ?? error}`)
})
setInterval(() => {
  const now = new Set()
  for (const a of consumer.assignments ?? []) {
    if (a.topic === topic) for (const p of a.partitions) now.add(p)
  }
  const gone = [...owned].filter(p => !now.has(p))
  const added = [...now].filter(p => !owned.has(p))
  if (gone.length > 0) emit(fenced ? 'lost' : 'revoked', gone)
  if (added.length > 0) emit('assigned', added)
  if (gone.length > 0 || added.length > 0) fenced = false
  owned = now
}, 50)

let stopping = false
process.on('SIGTERM', async () => {
  if (stopping) return
  stopping = true
  emit('stopping')
  await consumer.close(true).catch(() => {})
  process.exit(0)
})

const stream = await consumer.consume({ topics: [topic], sessionTimeout: 10000, heartbeatInterval: 1000, maxWaitTime: 1000 })
emit('started')
stream.on('data', () => {})
stream.on('error', e => emit('error', [], `stream: ${e?.message ?? e}`))
