// A client-telemetry plugin for the tests (KIP-714): a metrics reporter that receives the
// metrics clients push and writes each payload (OTLP bytes, as the broker hands them over) to
// a file under the directory named by the broker config kaflux.telemetry.dir.
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;

public class KafluxTelemetrySink implements MetricsReporter, ClientTelemetryExporterProvider {
    private final AtomicInteger count = new AtomicInteger();
    private volatile Path dir = Paths.get(System.getProperty("java.io.tmpdir"));

    @Override public void configure(Map<String, ?> configs) {
        Object where = configs.get("kaflux.telemetry.dir");
        if (where != null) dir = Paths.get(where.toString());
    }
    @Override public void init(List<KafkaMetric> metrics) {}
    @Override public void metricChange(KafkaMetric metric) {}
    @Override public void metricRemoval(KafkaMetric metric) {}
    @Override public void close() {}

    @Override public ClientTelemetryExporter clientTelemetryExporter() {
        return (ClientTelemetryContext context, ClientTelemetryPayload payload) -> {
            ByteBuffer data = payload.data().duplicate();
            byte[] bytes = new byte[data.remaining()];
            data.get(bytes);
            String name = payload.clientInstanceId() + "-" + count.incrementAndGet()
                + (payload.isTerminating() ? "-terminating" : "") + ".otlp";
            try {
                Files.write(dir.resolve(name + ".part"), bytes);
                Files.move(dir.resolve(name + ".part"), dir.resolve(name));
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        };
    }
}
