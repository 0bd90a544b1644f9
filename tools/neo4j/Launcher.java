// Runs Neo4j 5 Community embedded with only the Bolt connector, on loopback.
// Maven Central carries Neo4j as a library, not as the standalone server, so this
// small launcher is how `make neo4j-start` and `make test` get a real Neo4j 5.
// Usage: java -cp 'lib/*:classes' Launcher HOME_DIR PORT [PAGE_CACHE]
// PAGE_CACHE (default 512m) is the memory Neo4j caches its store files in: a search
// that reads pages outside it waits on the disk.
import java.nio.file.Path;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.io.ByteUnit;

public final class Launcher {
    public static void main(String[] args) throws InterruptedException {
        Path home = Path.of(args[0]);
        int port = Integer.parseInt(args[1]);
        long pageCache = ByteUnit.parse(args.length > 2 ? args[2] : "512m");
        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
            .setConfig(BoltConnector.enabled, true)
            .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
            .setConfig(GraphDatabaseSettings.auth_enabled, false)
            .setConfig(GraphDatabaseSettings.pagecache_memory, pageCache)
            .build();
        Runtime.getRuntime().addShutdownHook(new Thread(dbms::shutdown));
        System.out.println("bolt://127.0.0.1:" + port);
        System.out.flush();
        Thread.currentThread().join();
    }
}
