// The Java side of kaflux's interop tests: Apache Kafka's own clients (kafka-clients), driven by
// tests/support/java_client.py. Compiled at test time with javac against kafka_classpath().
//
//   java KafluxJavaHarness MODE SPEC_JSON
//
// Every line written to stdout is one JSON object; logs go to stderr. Bytes travel as base64
// (null stays null). Modes:
//
//   produce   stdin lines: {"op":"send","partition":P|null,"key":B64|null,"value":B64|null,
//             "headers":[[name,B64|null],...],"timestamp":MS|null} | {"op":"begin"} |
//             {"op":"commit"} | {"op":"abort"} | {"op":"flush"} |
//             {"op":"send_offsets","group":G,"offsets":[[topic,partition,offset],...]}; with
//             "catch":true an op's exception is answered as "error"/"message" instead of ending
//             the harness; each op except send answers
//             {"ok":OP,"acks":[[partition,offset],...]} (the acks of every send so far, in order;
//             [-1,-1] for a send that failed). A transactional.id in the config calls
//             initTransactions() first. EOF: flush, close, {"ok":"closed"}.
//   consume   spec {"config","assign":[[topic,partition],...]} or {"config","topics":[...]},
//             "max": records, "timeout_ms": total; prints {"event":"record",...} per record,
//             then {"event":"done","count":N}.
//   member    a group member (subscribe with a rebalance listener, commitSync after each poll's
//             records). Prints {"event":"subscribed"}, {"event":"assigned"|"revoked"|"lost",
//             "partitions":[...],"entered":S,"returned":S,"owned_after":[...]}, {"event":"records",
//             "at":S,"records":[[partition,offset,B64 value],...]}. Times S are System.nanoTime()
//             in seconds: CLOCK_MONOTONIC on Linux, the clock of Python's time.monotonic().
//             stdin "stop": close the consumer, print {"event":"closed"}, exit.
//   share     a KafkaShareConsumer: poll, print records like member, commitSync() (implicit
//             acknowledgement: every delivered record ACCEPTed). stdin "stop" as for member.
//   admin     spec {"config","ops":[...]}: one JSON answer line per op (see runAdmin).

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KafluxJavaHarness {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Base64.Encoder B64 = Base64.getEncoder();
    private static final Base64.Decoder UNB64 = Base64.getDecoder();

    private KafluxJavaHarness() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: KafluxJavaHarness MODE SPEC_JSON");
            System.exit(2);
        }
        JsonNode spec = JSON.readTree(args[1]);
        try {
            switch (args[0]) {
                case "produce" -> runProduce(spec);
                case "consume" -> runConsume(spec);
                case "member" -> runMember(spec);
                case "share" -> runShare(spec);
                case "admin" -> runAdmin(spec);
                case "load" -> runLoad(spec);
                default -> throw new IllegalArgumentException("unknown mode " + args[0]);
            }
        } catch (Throwable e) {
            ObjectNode out = JSON.createObjectNode();
            out.put("error", e.toString());
            emit(out);
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    // --- helpers ---

    private static synchronized void emit(JsonNode node) {
        try {
            System.out.println(JSON.writeValueAsString(node));
            System.out.flush();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static Properties props(JsonNode spec) {
        Properties p = new Properties();
        Iterator<Map.Entry<String, JsonNode>> it = spec.get("config").fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            p.put(e.getKey(), e.getValue().asText());
        }
        return p;
    }

    private static String b64(byte[] bytes) {
        return bytes == null ? null : B64.encodeToString(bytes);
    }

    private static byte[] unb64(JsonNode node) {
        return node == null || node.isNull() ? null : UNB64.decode(node.asText());
    }

    private static double nowS() {
        return System.nanoTime() / 1e9;
    }

    private static ObjectNode recordJson(ConsumerRecord<byte[], byte[]> r) {
        ObjectNode out = JSON.createObjectNode();
        out.put("event", "record");
        out.put("topic", r.topic());
        out.put("partition", r.partition());
        out.put("offset", r.offset());
        out.put("key", b64(r.key()));
        out.put("value", b64(r.value()));
        out.put("timestamp", r.timestamp());
        out.put("timestamp_type", r.timestampType().name);
        ArrayNode headers = out.putArray("headers");
        for (Header h : r.headers()) {
            ArrayNode pair = headers.addArray();
            pair.add(h.key());
            pair.add(b64(h.value()));
        }
        return out;
    }

    /** A thread that reads stdin and sets {@code stop} at "stop" or EOF, then runs {@code wake}. */
    private static AtomicBoolean watchStdin(Runnable wake) {
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread t = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("stop")) {
                        break;
                    }
                }
            } catch (Exception e) {
                // stdin gone: stop as well
            }
            stop.set(true);
            wake.run();
        }, "stdin-watch");
        t.setDaemon(true);
        t.start();
        return stop;
    }

    // --- produce ---

    private static void runProduce(JsonNode spec) throws Exception {
        Properties p = props(spec);
        String topic = spec.get("topic").asText();
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            if (p.containsKey("transactional.id")) {
                producer.initTransactions();
            }
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) {
                    continue;
                }
                JsonNode cmd = JSON.readTree(line);
                String op = cmd.get("op").asText();
                if (op.equals("send")) {
                        RecordHeaders headers = new RecordHeaders();
                        JsonNode hs = cmd.get("headers");
                        if (hs != null) {
                            for (JsonNode h : hs) {
                                headers.add(h.get(0).asText(), unb64(h.get(1)));
                            }
                        }
                        JsonNode part = cmd.get("partition");
                        JsonNode ts = cmd.get("timestamp");
                        sent.add(producer.send(new ProducerRecord<>(
                                topic,
                                part == null || part.isNull() ? null : part.asInt(),
                                ts == null || ts.isNull() ? null : ts.asLong(),
                                unb64(cmd.get("key")),
                                unb64(cmd.get("value")),
                                headers)));
                        continue;
                    }
                ObjectNode out = JSON.createObjectNode();
                try {
                    switch (op) {
                        case "begin" -> producer.beginTransaction();
                        case "commit" -> producer.commitTransaction();
                        case "abort" -> producer.abortTransaction();
                        case "flush" -> producer.flush();
                        case "send_offsets" -> {
                            Map<TopicPartition, OffsetAndMetadata> offsets = new java.util.HashMap<>();
                            for (JsonNode o : cmd.get("offsets")) {
                                offsets.put(new TopicPartition(o.get(0).asText(), o.get(1).asInt()),
                                        new OffsetAndMetadata(o.get(2).asLong()));
                            }
                            producer.sendOffsetsToTransaction(offsets,
                                    new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(cmd.get("group").asText()));
                        }
                        default -> throw new IllegalArgumentException("unknown op " + op);
                    }
                } catch (RuntimeException e) {
                    if (!cmd.path("catch").asBoolean(false)) {
                        throw e;
                    }
                    out.put("error", e.getClass().getName());
                    out.put("message", String.valueOf(e.getMessage()));
                }
                out.put("ok", op);
                ArrayNode acks = out.putArray("acks");
                for (Future<RecordMetadata> f : sent) {
                    ArrayNode a = acks.addArray();
                    if (f.isDone()) {
                        try {
                            RecordMetadata md = f.get();
                            a.add(md.partition());
                            a.add(md.offset());
                            continue;
                        } catch (Exception e) {
                            // reported as [-1, -1]
                        }
                    }
                    a.add(-1);
                    a.add(-1);
                }
                emit(out);
            }
            producer.flush();
        }
        ObjectNode out = JSON.createObjectNode();
        out.put("ok", "closed");
        emit(out);
    }

    // --- load: a steady producer, for comparing recovery after faults ---

    /**
     * Spec {"config","topic","partitions","rate"}: send numbered keys round-robin at "rate" records
     * a second until stdin says "stop" (or ends); then flush and print {"acks":[[key,partition,S],...],
     * "failed":N} with S the ack time (System.nanoTime() in seconds, as time.monotonic()).
     */
    private static void runLoad(JsonNode spec) throws Exception {
        Properties p = props(spec);
        String topic = spec.get("topic").asText();
        int partitions = spec.get("partitions").asInt();
        double rate = spec.get("rate").asDouble();
        AtomicBoolean stop = watchStdin(() -> {});
        List<double[]> acks = java.util.Collections.synchronizedList(new ArrayList<>());
        java.util.concurrent.atomic.AtomicLong failed = new java.util.concurrent.atomic.AtomicLong();
        ObjectNode ready = JSON.createObjectNode();
        ready.put("event", "started");
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            long seq = 0;
            long intervalNs = (long) (1e9 / rate);
            long next = System.nanoTime();
            emit(ready);
            while (!stop.get()) {
                final long key = seq;
                int partition = (int) (seq % partitions);
                seq++;
                producer.send(new ProducerRecord<>(topic, partition, String.format("k%09d", key).getBytes(StandardCharsets.UTF_8), new byte[100]),
                        (md, err) -> {
                            if (err == null) {
                                acks.add(new double[] {key, md.partition(), nowS()});
                            } else {
                                failed.incrementAndGet();
                            }
                        });
                next += intervalNs;
                long delay = next - System.nanoTime();
                if (delay > 0) {
                    Thread.sleep(delay / 1_000_000, (int) (delay % 1_000_000));
                } else {
                    next = System.nanoTime();
                }
            }
            producer.flush();
        }
        ObjectNode out = JSON.createObjectNode();
        ArrayNode arr = out.putArray("acks");
        synchronized (acks) {
            for (double[] a : acks) {
                ArrayNode row = arr.addArray();
                row.add((long) a[0]);
                row.add((int) a[1]);
                row.add(a[2]);
            }
        }
        out.put("failed", failed.get());
        emit(out);
    }

    // --- consume ---

    private static void runConsume(JsonNode spec) throws Exception {
        Properties p = props(spec);
        long max = spec.path("max").asLong(Long.MAX_VALUE);
        long deadline = System.nanoTime() + spec.path("timeout_ms").asLong(30_000) * 1_000_000L;
        long count = 0;
        try (KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            if (spec.has("assign")) {
                List<TopicPartition> tps = new ArrayList<>();
                for (JsonNode tp : spec.get("assign")) {
                    tps.add(new TopicPartition(tp.get(0).asText(), tp.get(1).asInt()));
                }
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
            } else {
                List<String> topics = new ArrayList<>();
                spec.get("topics").forEach(t -> topics.add(t.asText()));
                consumer.subscribe(topics);
            }
            while (count < max && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    emit(recordJson(r));
                    count++;
                }
            }
        }
        ObjectNode out = JSON.createObjectNode();
        out.put("event", "done");
        out.put("count", count);
        emit(out);
    }

    // --- a group member ---

    private static ArrayNode partitionsJson(ObjectNode out, String field, Collection<TopicPartition> tps) {
        ArrayNode arr = out.putArray(field);
        new TreeSet<>(tps.stream().map(TopicPartition::partition).toList()).forEach(arr::add);
        return arr;
    }

    private static void runMember(JsonNode spec) throws Exception {
        Properties p = props(spec);
        List<String> topics = new ArrayList<>();
        spec.get("topics").forEach(t -> topics.add(t.asText()));
        KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        AtomicBoolean stop = watchStdin(() -> {});
        Set<TopicPartition> owned = new HashSet<>();
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            private void log(String kind, Collection<TopicPartition> tps, double entered) {
                if (kind.equals("assigned")) {
                    owned.addAll(tps);
                } else {
                    owned.removeAll(tps);
                }
                ObjectNode out = JSON.createObjectNode();
                out.put("event", kind);
                partitionsJson(out, "partitions", tps);
                out.put("entered", entered);
                out.put("returned", nowS());
                partitionsJson(out, "owned_after", owned);
                emit(out);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                log("assigned", tps, nowS());
            }

            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                double entered = nowS();
                // Positions of records already handed out are committed after each poll; commit
                // here too, so that a revocation never leaves an uncommitted position behind.
                if (!tps.isEmpty()) {
                    consumer.commitSync();
                }
                log("revoked", tps, entered);
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> tps) {
                log("lost", tps, nowS());
            }
        };
        consumer.subscribe(topics, listener);
        ObjectNode ready = JSON.createObjectNode();
        ready.put("event", "subscribed");
        emit(ready);
        try {
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(100));
                } catch (WakeupException e) {
                    break;
                }
                if (records.isEmpty()) {
                    continue;
                }
                ObjectNode out = JSON.createObjectNode();
                out.put("event", "records");
                out.put("at", nowS());
                ArrayNode arr = out.putArray("records");
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    ArrayNode rec = arr.addArray();
                    rec.add(r.partition());
                    rec.add(r.offset());
                    rec.add(b64(r.value()));
                }
                emit(out);
                try {
                    consumer.commitSync();
                } catch (WakeupException e) {
                    consumer.commitSync();
                    break;
                }
            }
        } finally {
            consumer.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(20)));
        }
        ObjectNode out = JSON.createObjectNode();
        out.put("event", "closed");
        emit(out);
    }

    // --- a share group member ---

    private static void runShare(JsonNode spec) throws Exception {
        Properties p = props(spec);
        List<String> topics = new ArrayList<>();
        spec.get("topics").forEach(t -> topics.add(t.asText()));
        KafkaShareConsumer<byte[], byte[]> consumer =
                new KafkaShareConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        AtomicBoolean stop = watchStdin(() -> {});
        consumer.subscribe(topics);
        ObjectNode ready = JSON.createObjectNode();
        ready.put("event", "subscribed");
        emit(ready);
        try {
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(100));
                } catch (WakeupException e) {
                    break;
                }
                if (records.isEmpty()) {
                    continue;
                }
                ObjectNode out = JSON.createObjectNode();
                out.put("event", "records");
                out.put("at", nowS());
                ArrayNode arr = out.putArray("records");
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    ArrayNode rec = arr.addArray();
                    rec.add(r.partition());
                    rec.add(r.offset());
                    rec.add(b64(r.value()));
                    rec.add(r.deliveryCount().orElse((short) -1));
                }
                // Implicit acknowledgement: commitSync() accepts every record this poll delivered.
                Map<TopicIdPartitionKey, String> failed = new java.util.TreeMap<>();
                try {
                    consumer.commitSync().forEach((tip, err) -> err.ifPresent(
                            x -> failed.put(new TopicIdPartitionKey(tip.topic(), tip.partition()), x.toString())));
                } catch (WakeupException e) {
                    consumer.commitSync();
                    stop.set(true);
                }
                ArrayNode errs = out.putArray("ack_errors");
                failed.forEach((k, v) -> errs.add(k + ": " + v));
                emit(out);
            }
        } finally {
            consumer.close(Duration.ofSeconds(20));
        }
        ObjectNode out = JSON.createObjectNode();
        out.put("event", "closed");
        emit(out);
    }

    private record TopicIdPartitionKey(String topic, int partition) implements Comparable<TopicIdPartitionKey> {
        @Override
        public int compareTo(TopicIdPartitionKey o) {
            int c = topic.compareTo(o.topic);
            return c != 0 ? c : Integer.compare(partition, o.partition);
        }

        @Override
        public String toString() {
            return topic + "-" + partition;
        }
    }

    // --- admin ---

    /**
     * Ops: {"op":"list_groups"} → {"groups":[{"group_id","type","protocol","state"}]};
     * {"op":"describe_groups","groups":[...]} → {"groups":{id:{"state","assignor","type",
     * "members":[{"client_id","assignment":[[topic,partition],...]}]}}};
     * {"op":"describe_share_group","group":g} → {"state","members":[...]};
     * {"op":"group_offsets","group":g} → {"offsets":[[topic,partition,offset],...]};
     * {"op":"topic_configs","topic":t} → {"configs":{name:{"value","source","default"}}};
     * {"op":"quorum"} → {"leader": the active KRaft controller's id,"epoch","voters":[...]}.
     */
    private static void runAdmin(JsonNode spec) throws Exception {
        try (Admin admin = Admin.create(props(spec))) {
            for (JsonNode op : spec.get("ops")) {
                ObjectNode out = JSON.createObjectNode();
                String name = op.get("op").asText();
                out.put("op", name);
                switch (name) {
                    case "list_groups" -> {
                        ArrayNode arr = out.putArray("groups");
                        for (GroupListing g : admin.listGroups().all().get()) {
                            ObjectNode o = arr.addObject();
                            o.put("group_id", g.groupId());
                            o.put("type", g.type().map(Object::toString).orElse(null));
                            o.put("protocol", g.protocol());
                            o.put("state", g.groupState().map(Object::toString).orElse(null));
                        }
                    }
                    case "describe_groups" -> {
                        List<String> ids = new ArrayList<>();
                        op.get("groups").forEach(g -> ids.add(g.asText()));
                        ObjectNode groups = out.putObject("groups");
                        for (Map.Entry<String, ConsumerGroupDescription> e :
                                admin.describeConsumerGroups(ids).all().get().entrySet()) {
                            ConsumerGroupDescription d = e.getValue();
                            ObjectNode o = groups.putObject(e.getKey());
                            o.put("state", d.groupState().toString());
                            o.put("assignor", d.partitionAssignor());
                            o.put("type", d.type().toString());
                            o.put("coordinator", d.coordinator() == null ? -1 : d.coordinator().id());
                            ArrayNode members = o.putArray("members");
                            for (MemberDescription m : d.members()) {
                                ObjectNode mo = members.addObject();
                                mo.put("client_id", m.clientId());
                                mo.put("member_id", m.consumerId());
                                ArrayNode a = mo.putArray("assignment");
                                for (TopicPartition tp : m.assignment().topicPartitions()) {
                                    ArrayNode pair = a.addArray();
                                    pair.add(tp.topic());
                                    pair.add(tp.partition());
                                }
                            }
                        }
                    }
                    case "describe_share_group" -> {
                        String g = op.get("group").asText();
                        ShareGroupDescription d =
                                admin.describeShareGroups(List.of(g)).all().get().get(g);
                        out.put("state", d.groupState().toString());
                        ArrayNode members = out.putArray("members");
                        for (ShareMemberDescription m : d.members()) {
                            members.addObject().put("client_id", m.clientId());
                        }
                    }
                    case "group_offsets" -> {
                        String g = op.get("group").asText();
                        ArrayNode arr = out.putArray("offsets");
                        Map<TopicPartition, OffsetAndMetadata> offsets =
                                admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
                        List<TopicPartition> tps = new ArrayList<>(offsets.keySet());
                        tps.sort((a, b) -> a.topic().equals(b.topic())
                                ? Integer.compare(a.partition(), b.partition())
                                : a.topic().compareTo(b.topic()));
                        for (TopicPartition tp : tps) {
                            OffsetAndMetadata om = offsets.get(tp);
                            if (om == null) {
                                continue;
                            }
                            ArrayNode row = arr.addArray();
                            row.add(tp.topic());
                            row.add(tp.partition());
                            row.add(om.offset());
                        }
                    }
                    case "topic_configs" -> {
                        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, op.get("topic").asText());
                        Config config = admin.describeConfigs(Collections.singleton(res)).all().get().get(res);
                        ObjectNode configs = out.putObject("configs");
                        for (ConfigEntry e : config.entries()) {
                            ObjectNode o = configs.putObject(e.name());
                            o.put("value", e.value());
                            o.put("source", e.source().name());
                            o.put("default", e.isDefault());
                            o.put("read_only", e.isReadOnly());
                            o.put("sensitive", e.isSensitive());
                        }
                    }
                    case "quorum" -> {
                        org.apache.kafka.clients.admin.QuorumInfo q =
                                admin.describeMetadataQuorum().quorumInfo().get();
                        out.put("leader", q.leaderId());
                        out.put("epoch", q.leaderEpoch());
                        ArrayNode voters = out.putArray("voters");
                        q.voters().forEach(v -> voters.add(v.replicaId()));
                    }
                    default -> throw new IllegalArgumentException("unknown admin op " + name);
                }
                emit(out);
            }
        }
    }
}
