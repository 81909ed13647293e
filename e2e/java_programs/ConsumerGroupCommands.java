// Several runs of Kafka's `kafka-consumer-groups.sh` (ConsumerGroupCommand.main) in one JVM, one
// after the other, each with its own stdout and stderr: the e2e comparisons of that tool against
// groupshift and against Kafka run a few dozen commands, and a JVM start per command cost most of
// their time. Run in Java's single-file source mode (`java -cp <Kafka's classpath> <this file>`).
//
// args: a file of invocations, one argument per line, a blank line after each invocation.
// stdout: one line per invocation, in order: `RESULT <exit code> <stdout> <stderr>`, the two
// streams base64-encoded. The exit code is what the JVM would have exited with: the code given to
// Kafka's Exit (caught through Exit.setExitProcedure, so the JVM goes on to the next invocation),
// 1 after an uncaught exception (its trace on stderr as the JVM prints it), 0 otherwise.
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;

public class ConsumerGroupCommands {
    /** Thrown by the exit procedure instead of exiting: carries the status code. */
    static final class ExitCalled extends RuntimeException {
        final int code;

        ExitCalled(int code) {
            super("exit " + code, null, false, false);
            this.code = code;
        }
    }

    static final String[] MAIN_CLASSES = {
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "kafka.admin.ConsumerGroupCommand",
    };
    // Kafka's Exit moved packages in 4.x; the first one present is used.
    static final String[] EXIT_CLASSES = {
        "org.apache.kafka.common.utils.internals.Exit", "org.apache.kafka.common.utils.Exit",
    };

    static Class<?> first(String[] names) throws ClassNotFoundException {
        for (String name : names) {
            try {
                return Class.forName(name);
            } catch (ClassNotFoundException e) {
                // try the next
            }
        }
        throw new ClassNotFoundException(String.join(" or ", names));
    }

    /** Exit.setExitProcedure and Exit.setHaltProcedure to a procedure that throws ExitCalled. */
    static void catchExits() throws Exception {
        Class<?> exit = first(EXIT_CLASSES);
        for (String setter : new String[] {"setExitProcedure", "setHaltProcedure"}) {
            Method set = null;
            for (Method m : exit.getMethods()) {
                if (m.getName().equals(setter) && m.getParameterCount() == 1) {
                    set = m;
                }
            }
            if (set == null) {
                continue;
            }
            Class<?> procedure = set.getParameterTypes()[0];
            Object thrower = Proxy.newProxyInstance(
                procedure.getClassLoader(),
                new Class<?>[] {procedure},
                (proxy, method, args) -> {
                    if (method.getDeclaringClass() == Object.class) {
                        return method.getName().equals("hashCode") ? 0 : method.getName().equals("equals") ? false : "exit";
                    }
                    throw new ExitCalled((Integer) args[0]);
                });
            set.invoke(null, thrower);
        }
    }

    static List<String[]> invocations(Path file) throws Exception {
        List<String[]> out = new ArrayList<>();
        List<String> current = new ArrayList<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            if (line.isEmpty()) {
                out.add(current.toArray(new String[0]));
                current = new ArrayList<>();
            } else {
                current.add(line);
            }
        }
        if (!current.isEmpty()) {
            out.add(current.toArray(new String[0]));
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        Method main = first(MAIN_CLASSES).getMethod("main", String[].class);
        catchExits();
        Base64.Encoder b64 = Base64.getEncoder();
        for (String[] invocation : invocations(Path.of(args[0]))) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            PrintStream outStream = new PrintStream(out, true, StandardCharsets.UTF_8);
            PrintStream errStream = new PrintStream(err, true, StandardCharsets.UTF_8);
            System.setOut(outStream);
            System.setErr(errStream);
            int code = 0;
            try {
                main.invoke(null, (Object) invocation);
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                if (cause instanceof ExitCalled) {
                    code = ((ExitCalled) cause).code;
                } else {
                    code = 1;
                    errStream.print("Exception in thread \"main\" ");
                    cause.printStackTrace(errStream);
                }
            } finally {
                outStream.flush();
                errStream.flush();
                System.setOut(realOut);
                System.setErr(realErr);
            }
            realOut.println("RESULT " + code + " " + b64.encodeToString(out.toByteArray()) + " "
                + b64.encodeToString(err.toByteArray()));
            realOut.flush();
        }
    }
}
