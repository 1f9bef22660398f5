// kafkajs SASL login of the interop tests: joins GROUP on TOPIC over
// SASL_PLAINTEXT with MECHANISM (scram-sha-256, scram-sha-512, plain) as
// USER and PASSWORD, and prints "joined" once it owns a partition, or
// "refused: ..." when the client gives up, within TIMEOUT seconds. Usage:
// node kafkajs_sasl.mjs BROKERS MECHANISM USER PASSWORD GROUP TOPIC TIMEOUT
import { Kafka, logLevel } from 'kafkajs'

const [brokers, mechanism, username, password, groupId, topic, timeout] = process.argv.slice(2)
const kafka = new Kafka({
  clientId: 'tenure-interop-sasl', brokers: brokers.split(','), logLevel: logLevel.NOTHING,
  sasl: { mechanism: mechanism.toLowerCase(), username, password }, retry: { retries: 1 },
})
const consumer = kafka.consumer({ groupId })
const timer = setTimeout(() => { console.log('refused: no partition within the timeout'); process.exit(1) }, Number(timeout) * 1000)
consumer.on(consumer.events.GROUP_JOIN, async e => {
  if ((e.payload.memberAssignment[topic] ?? []).length > 0) {
    console.log('joined')
    clearTimeout(timer)
    await consumer.disconnect().catch(() => {})
    process.exit(0)
  }
})
try {
  await consumer.connect()
  await consumer.subscribe({ topics: [topic] })
  await consumer.run({ eachMessage: async () => {} })
} catch (e) {
  console.log(`refused: ${e.name}: ${e.message}`)
  process.exit(1)
}
