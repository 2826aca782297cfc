import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import java.util.zip.ZipOutputStream;

/**
 * Usage: java tools/ArchivableLambdas.java IN.jar OUT.jar
 *
 * <p>Copies IN.jar to OUT.jar with Scala's function literals made archivable by the JDK's AOT
 * cache. Scala compiles every function literal (and every by-name and context-function argument)
 * to an invokedynamic call of {@code LambdaMetafactory.altMetafactory} with the SERIALIZABLE flag,
 * often with a "bridge" of the literal's own types. The AOT cache (JDK 24+) keeps only lambdas made
 * by {@code LambdaMetafactory.metafactory}; every other one is spun into a class at run time, which
 * costs a cold JVM about a millisecond apiece (a stage spun some 70 at start-up: README,
 * "Start-up"). asyncpipe never serializes a function, so such a call site loses nothing when it
 * calls {@code metafactory} with the same first three arguments instead.
 *
 * <p>A call site is changed only when that is exactly equivalent apart from serializability:
 * <ul>
 *   <li>flags = SERIALIZABLE, and nothing else (no marker interfaces, no bridges); or
 *   <li>flags = SERIALIZABLE | BRIDGES, and every call site of that bootstrap method makes a
 *       {@code scala.FunctionN} or a {@code scala.runtime.function.JProcedureN}: their only abstract
 *       method takes and returns erased types ({@code Object}), which is the method that
 *       {@code metafactory} implements, so the bridges (the literal's own parameter types) are
 *       methods that no interface declares and no caller can reach.
 * </ul>
 * Anything else (a Java functional interface with bridges, marker interfaces) is left as it is.
 *
 * <p>How: only the constant pool and the {@code BootstrapMethods} attribute change. Five entries
 * are appended to the constant pool (the {@code metafactory} method handle and what it refers to),
 * and each changed bootstrap method points to that handle and keeps its first three arguments.
 * Bootstrap methods keep their indices and no code changes, so stack maps and everything else stay
 * valid byte for byte. Other entries are copied unchanged, in order, with their times.
 */
public final class ArchivableLambdas {
  private static final String FACTORY = "java/lang/invoke/LambdaMetafactory";
  private static final String METAFACTORY_TYPE =
      "(Ljava/lang/invoke/MethodHandles$Lookup;Ljava/lang/String;Ljava/lang/invoke/MethodType;"
          + "Ljava/lang/invoke/MethodType;Ljava/lang/invoke/MethodHandle;Ljava/lang/invoke/MethodType;)"
          + "Ljava/lang/invoke/CallSite;";
  private static final int FLAG_SERIALIZABLE = 1;
  private static final int FLAG_BRIDGES = 4;
  /** Interfaces whose only abstract method has erased types (see the class comment). */
  private static final Pattern ERASED_SAM = Pattern.compile("Lscala/(Function|runtime/function/JProcedure)[0-9]+;");

  private ArchivableLambdas() {}

  public static void main(String[] args) throws IOException {
    if (args.length != 2) {
      System.err.println("usage: java tools/ArchivableLambdas.java IN.jar OUT.jar");
      System.exit(2);
    }
    Totals totals = new Totals();
    try (ZipFile in = new ZipFile(args[0]);
        OutputStream file = new FileOutputStream(args[1]);
        ZipOutputStream out = new ZipOutputStream(file)) {
      for (ZipEntry entry : Collections.list(in.entries())) {
        byte[] bytes;
        try (var stream = in.getInputStream(entry)) {
          bytes = stream.readAllBytes();
        }
        if (entry.getName().endsWith(".class")) {
          try {
            bytes = new ClassFile(bytes).withArchivableLambdas(totals);
          } catch (RuntimeException e) {
            throw new IOException(entry.getName() + ": " + e, e);
          }
        }
        ZipEntry copy = new ZipEntry(entry.getName());
        copy.setTime(entry.getTime());
        out.putNextEntry(copy);
        out.write(bytes);
        out.closeEntry();
      }
    }
    System.err.printf("ArchivableLambdas: %d call sites in %d classes now use metafactory; %d left as they were%n",
        totals.sites, totals.classes, totals.left);
  }

  private static final class Totals {
    int sites, classes, left;
  }

  /** One class file: where its constant pool entries and its BootstrapMethods attribute are. */
  private static final class ClassFile {
    private final byte[] b;
    private final int poolCount; // constant_pool_count: entries are 1 .. poolCount - 1
    private final int[] tag, at; // each entry's tag and offset
    private final String[] utf8;
    private final int poolEnd;

    ClassFile(byte[] bytes) {
      b = bytes;
      if (s4(0) != 0xCAFEBABE) throw new IllegalArgumentException("not a class file");
      poolCount = u2(8);
      tag = new int[poolCount];
      at = new int[poolCount];
      utf8 = new String[poolCount];
      int p = 10;
      for (int i = 1; i < poolCount; i++) {
        tag[i] = b[p] & 0xff;
        at[i] = p;
        switch (tag[i]) {
          case 1 -> { // Utf8: the names compared here are ASCII, where modified UTF-8 is UTF-8
            int length = u2(p + 1);
            utf8[i] = new String(b, p + 3, length, StandardCharsets.UTF_8);
            p += 3 + length;
          }
          case 3, 4, 9, 10, 11, 12, 17, 18 -> p += 5; // Integer Float Fieldref Methodref ... InvokeDynamic
          case 5, 6 -> { p += 9; i++; } // Long, Double take two slots
          case 7, 8, 16, 19, 20 -> p += 3; // Class String MethodType Module Package
          case 15 -> p += 4; // MethodHandle
          default -> throw new IllegalArgumentException("unknown constant pool tag " + tag[i] + " at " + p);
        }
      }
      poolEnd = p;
    }

    /** The class file with its eligible call sites calling metafactory (itself if there are none). */
    byte[] withArchivableLambdas(Totals totals) {
      Set<Integer> altHandles = new HashSet<>();
      int factoryClass = 0;
      for (int i = 1; i < poolCount; i++) {
        if (tag[i] != 15 || tag[u2(at[i] + 2)] != 10) continue; // a MethodHandle of a Methodref
        int method = u2(at[i] + 2);
        int owner = u2(at[method] + 1), nameAndType = u2(at[method] + 3);
        if (FACTORY.equals(utf8[u2(at[owner] + 1)]) && "altMetafactory".equals(utf8[u2(at[nameAndType] + 1)])) {
          altHandles.add(i);
          factoryClass = owner;
        }
      }
      if (altHandles.isEmpty()) return b;
      int attribute = bootstrapMethodsAttribute();
      if (attribute < 0) return b;

      Map<Integer, Set<String>> madeTypes = typesMadeByBootstrapMethod();
      int methodCount = u2(attribute + 6);
      List<int[]> methods = new ArrayList<>(methodCount); // {handle, argument...}
      boolean changed = false;
      int p = attribute + 8;
      for (int k = 0; k < methodCount; k++) {
        int handle = u2(p), argumentCount = u2(p + 2);
        int[] arguments = new int[argumentCount];
        for (int a = 0; a < argumentCount; a++) arguments[a] = u2(p + 4 + 2 * a);
        p += 4 + 2 * argumentCount;
        if (altHandles.contains(handle) && argumentCount >= 4 && tag[arguments[3]] == 3) {
          if (eligible(s4(at[arguments[3]] + 1), argumentCount, madeTypes.get(k))) {
            int[] method = {-1, arguments[0], arguments[1], arguments[2]}; // -1: the new handle
            methods.add(method);
            changed = true;
            totals.sites++;
            continue;
          }
          totals.left++;
        }
        int[] method = new int[1 + argumentCount];
        method[0] = handle;
        System.arraycopy(arguments, 0, method, 1, argumentCount);
        methods.add(method);
      }
      if (!changed) return b;
      if (poolCount + 5 > 0xffff) throw new IllegalStateException("no room in the constant pool for 5 entries");
      totals.classes++;
      return rewritten(attribute, methods, factoryClass);
    }

    private static boolean eligible(int flags, int argumentCount, Set<String> madeTypes) {
      if (flags == FLAG_SERIALIZABLE) return argumentCount == 4;
      if (flags != (FLAG_SERIALIZABLE | FLAG_BRIDGES) || madeTypes == null) return false;
      for (String type : madeTypes) if (!ERASED_SAM.matcher(type).matches()) return false;
      return true;
    }

    /** For each bootstrap method, the types its invokedynamic call sites return (the interface made). */
    private Map<Integer, Set<String>> typesMadeByBootstrapMethod() {
      Map<Integer, Set<String>> made = new HashMap<>();
      for (int i = 1; i < poolCount; i++) {
        if (tag[i] != 18) continue;
        int method = u2(at[i] + 1), nameAndType = u2(at[i] + 3);
        String descriptor = utf8[u2(at[nameAndType] + 3)];
        made.computeIfAbsent(method, k -> new HashSet<>()).add(descriptor.substring(descriptor.indexOf(')') + 1));
      }
      return made;
    }

    /** The offset of the class's BootstrapMethods attribute, or -1. */
    private int bootstrapMethodsAttribute() {
      int p = poolEnd + 6; // access_flags, this_class, super_class
      p += 2 + 2 * u2(p); // interfaces
      for (int members = 0; members < 2; members++) { // fields, then methods
        int count = u2(p);
        p += 2;
        for (int m = 0; m < count; m++) p = skipAttributes(p + 6);
      }
      int count = u2(p);
      p += 2;
      for (int a = 0; a < count; a++) {
        if ("BootstrapMethods".equals(utf8[u2(p)])) return p;
        p += 6 + s4(p + 2);
      }
      return -1;
    }

    private int skipAttributes(int p) {
      int count = u2(p);
      p += 2;
      for (int a = 0; a < count; a++) p += 6 + s4(p + 2);
      return p;
    }

    private byte[] rewritten(int attribute, List<int[]> methods, int factoryClass) {
      try {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(b.length + 512);
        DataOutputStream out = new DataOutputStream(bytes);
        out.write(b, 0, 8);
        out.writeShort(poolCount + 5);
        out.write(b, 10, poolEnd - 10);
        int name = poolCount, type = poolCount + 1, nameAndType = poolCount + 2, method = poolCount + 3;
        int handle = poolCount + 4;
        out.writeByte(1);
        out.writeUTF("metafactory");
        out.writeByte(1);
        out.writeUTF(METAFACTORY_TYPE);
        out.writeByte(12);
        out.writeShort(name);
        out.writeShort(type);
        out.writeByte(10);
        out.writeShort(factoryClass);
        out.writeShort(nameAndType);
        out.writeByte(15);
        out.writeByte(6); // REF_invokeStatic
        out.writeShort(method);
        out.write(b, poolEnd, attribute + 2 - poolEnd); // up to the attribute's name
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        DataOutputStream table = new DataOutputStream(body);
        table.writeShort(methods.size());
        for (int[] m : methods) {
          table.writeShort(m[0] < 0 ? handle : m[0]);
          table.writeShort(m.length - 1);
          for (int a = 1; a < m.length; a++) table.writeShort(m[a]);
        }
        out.writeInt(body.size());
        body.writeTo(out);
        int after = attribute + 6 + s4(attribute + 2);
        out.write(b, after, b.length - after);
        out.flush();
        return bytes.toByteArray();
      } catch (IOException e) {
        throw new IllegalStateException(e); // a ByteArrayOutputStream does not fail
      }
    }

    private int u2(int p) {
      return ((b[p] & 0xff) << 8) | (b[p + 1] & 0xff);
    }

    private int s4(int p) {
      return ((b[p] & 0xff) << 24) | ((b[p + 1] & 0xff) << 16) | ((b[p + 2] & 0xff) << 8) | (b[p + 3] & 0xff);
    }
  }
}
