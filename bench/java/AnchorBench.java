// The Java client side of bench/bench_anchors.py: Apache Kafka's own KafkaConsumer, KafkaProducer and
// KafkaShareConsumer, timed inside one JVM so that its start-up and JIT warm-up are left out (and
// reported apart). Compiled by bench_anchors.py with javac against kafka-clients 4.4.
//
//   java AnchorBench consume BOOTSTRAP TOPIC RECORDS classic|consumer
//   java AnchorBench produce BOOTSTRAP TOPIC RECORDS VALUE_BYTES
//   java AnchorBench share   BOOTSTRAP TOPIC RECORDS GROUP
//   java AnchorBench share-earliest BOOTSTRAP GROUP
//
// Each timed mode runs a warm-up round first (the same work: the whole backlog read once, or the
// same number of records produced), then the measured round, and prints one JSON line:
// records, seconds, cpu_s (process CPU, every thread, during the measured round), peak_rss_mib
// (VmHWM: the whole run, warm-up included), jvm_startup_s and jvm_startup_cpu_s (from JVM start
// to main()), warmup_s; share mode adds first_records_s and warmup_first_records_s (from the
// round's start to its first records: the warm-up round is the fresh share group's first member).

import com.sun.management.OperatingSystemMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class AnchorBench {
    private static final OperatingSystemMXBean OS =
            (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    private static final long DEADLINE_MS = 600_000;

    private AnchorBench() {}

    public static void main(String[] args) throws Exception {
        double startupS = ManagementFactory.getRuntimeMXBean().getUptime() / 1000.0;
        double startupCpuS = OS.getProcessCpuTime() / 1e9;
        String mode = args[0];
        String bootstrap = args[1];
        if (mode.equals("share-earliest")) {
            shareEarliest(bootstrap, args[2]);
            return;
        }
        String topic = args[2];
        long records = Long.parseLong(args[3]);
        long t0 = System.nanoTime();
        Runnable round;
        switch (mode) {
            case "consume":
                round = () -> consume(bootstrap, topic, records, args[4]);
                break;
            case "produce":
                round = () -> produce(bootstrap, topic, records, Integer.parseInt(args[4]));
                break;
            case "share":
                // A share group hands each record out once: the warm-up reads half the backlog,
                // the measured round the other half (the parent produced 2 x RECORDS).
                round = () -> share(bootstrap, topic, records, args[4]);
                break;
            default:
                throw new IllegalArgumentException("unknown mode " + mode);
        }
        round.run();
        double warmupS = (System.nanoTime() - t0) / 1e9;
        double warmupFirstS = FIRST_NS.get() / 1e9;
        long cpu0 = OS.getProcessCpuTime();
        long w0 = System.nanoTime();
        long got = LAST.get();
        round.run();
        double seconds = (System.nanoTime() - w0) / 1e9;
        double cpuS = (OS.getProcessCpuTime() - cpu0) / 1e9;
        String first = mode.equals("share")
                ? String.format(", \"first_records_s\": %.3f, \"warmup_first_records_s\": %.3f",
                        FIRST_NS.get() / 1e9, warmupFirstS)
                : "";
        System.out.printf(
                "{\"records\": %d, \"seconds\": %.6f, \"cpu_s\": %.6f, \"peak_rss_mib\": %.1f, "
                        + "\"jvm_startup_s\": %.3f, \"jvm_startup_cpu_s\": %.3f, \"warmup_s\": %.3f, "
                        + "\"warmup_records\": %d%s}%n",
                LAST.get(), seconds, cpuS, peakRssMib(), startupS, startupCpuS, warmupS, got, first);
        System.out.flush();
        System.exit(0); // no lingering client threads
    }

    private static final AtomicLong LAST = new AtomicLong();
    /** share rounds: nanoseconds from the round's start (the consumer's creation) to its first records */
    private static final AtomicLong FIRST_NS = new AtomicLong();

    private static double peakRssMib() {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", "")) / 1024.0;
                }
            }
        } catch (Exception e) {
            // not Linux: no figure
        }
        return Double.NaN;
    }

    private static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        return p;
    }

    private static void consume(String bootstrap, String topic, long records, String protocol) {
        Properties p = common(bootstrap);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("max.poll.records", "500");
        p.put("group.protocol", protocol);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo info : c.partitionsFor(topic, Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(topic, info.partition()));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            long seen = 0;
            long bytes = 0;
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (seen < records && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> batch = c.poll(Duration.ofSeconds(1));
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    bytes += r.value().length;
                    seen++;
                }
            }
            if (bytes < 0) {
                throw new IllegalStateException();
            }
            LAST.set(seen);
        }
    }

    private static void produce(String bootstrap, String topic, long records, int valueBytes) {
        Properties p = common(bootstrap);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("linger.ms", "5");
        Random rng = new Random(1);
        byte[][] pool = new byte[4096][];
        for (int i = 0; i < pool.length; i++) {
            pool[i] = new byte[valueBytes];
            rng.nextBytes(pool[i]);
        }
        AtomicLong acked = new AtomicLong();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (long i = 0; i < records; i++) {
                byte[] key = String.format("%08d", i).getBytes();
                producer.send(new ProducerRecord<>(topic, key, pool[(int) (i & 4095)]), (md, e) -> {
                    if (e == null) {
                        acked.incrementAndGet();
                    }
                });
            }
            producer.flush();
        }
        LAST.set(acked.get());
    }

    private static void share(String bootstrap, String topic, long records, String group) {
        Properties p = common(bootstrap);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("group.id", group);
        long start = System.nanoTime();
        FIRST_NS.set(0);
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(Collections.singletonList(topic));
            long seen = 0;
            long bytes = 0;
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (seen < records && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofSeconds(1))) {
                    bytes += r.value().length;
                    seen++;
                }
                if (seen > 0 && FIRST_NS.get() == 0) {
                    FIRST_NS.set(System.nanoTime() - start);
                }
            }
            c.commitSync();
            if (bytes < 0) {
                throw new IllegalStateException();
            }
            LAST.set(seen);
        }
    }

    private static void shareEarliest(String bootstrap, String group) throws Exception {
        try (Admin admin = Admin.create(common(bootstrap))) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp op = new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get();
        }
        System.out.println("{\"share.auto.offset.reset\": \"earliest\"}");
    }
}
