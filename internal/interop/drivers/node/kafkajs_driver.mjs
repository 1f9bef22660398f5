// kafkajs 2.2.4 driver of the fail-over matrix: a classic (eager) consumer
// of one topic in a group, printing what its group events say as JSON
// lines until SIGTERM. Usage: node kafkajs_driver.mjs BROKERS GROUP TOPIC.
// kafkajs has no assignment callbacks: each GROUP_JOIN is an eager
// rebalance, so the driver reports everything it owned as revoked and the
// new assignment as assigned; a CRASH loses what it owned. The client
// settings are docs/FAILOVER.md's.
import { Kafka, logLevel } from 'kafkajs'
import { emit } from './events.mjs'

const [brokers, groupId, topic] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'tenure-interop', brokers: brokers.split(','), logLevel: logLevel.WARN })
const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 1000, maxWaitTimeInMs: 1000 })
let owned = []

consumer.on(consumer.events.GROUP_JOIN, e => {
  if (owned.length > 0) emit('revoked', owned)
  owned = e.payload.memberAssignment[topic] ?? []
  emit('assigned', owned, `generation ${e.payload.groupId} member ${e.payload.memberId}`)
})
consumer.on(consumer.events.CRASH, e => {
  emit('lost', owned, `crash (restart: ${e.payload.restart}): ${e.payload.error}`)
  owned = []
})

let stopping = false
process.on('SIGTERM', async () => {
  if (stopping) return
  stopping = true
  emit('stopping')
  await consumer.disconnect().catch(() => {})
  process.exit(0)
})

await consumer.connect()
await consumer.subscribe({ topics: [topic] })
emit('started')
await consumer.run({ eachMessage: async () => {} })
