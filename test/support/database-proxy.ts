import { createConnection, createServer, Server, Socket } from 'node:net';

/**
 * A TCP proxy between the app and its database, for outage tests on either database (a real server or the
 * embedded one, where pg_terminate_backend is no use): `cut()` drops every open connection as a dying server or
 * network would, `refuse()` also stops listening (connections refused), `hang()` accepts connections and never
 * answers (a black-holed host), `restore()` serves normally again on the same port.
 */
export class DatabaseProxy {
  private readonly sockets = new Set<Socket>();
  private mode: 'forward' | 'hang' = 'forward';

  private constructor(
    private server: Server,
    private readonly target: URL,
    readonly port: number,
  ) {}

  static async start(databaseUrl: string): Promise<DatabaseProxy> {
    const target = new URL(databaseUrl);
    const proxy = new DatabaseProxy(createServer(), target, 0);
    const port = await proxy.listen(0);
    return Object.assign(proxy, { port });
  }

  /** The database URL with the proxy in between. */
  get url(): string {
    const url = new URL(this.target.toString());
    url.hostname = '127.0.0.1';
    url.port = String(this.port);
    return url.toString();
  }

  cut(): void {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  async refuse(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.cut();
    });
  }

  hang(): void {
    this.mode = 'hang';
    this.cut();
  }

  async restore(): Promise<void> {
    if (this.mode === 'hang') this.cut(); // fail the connection attempts left hanging, rather than let them time out
    this.mode = 'forward';
    if (!this.server.listening) {
      this.server = createServer();
      await this.listen(this.port);
    }
  }

  async close(): Promise<void> {
    if (this.server.listening) await this.refuse();
    this.cut();
  }

  private listen(port: number): Promise<number> {
    this.server.on('connection', (client) => this.accept(client));
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => resolve((this.server.address() as { port: number }).port));
    });
  }

  private accept(client: Socket): void {
    this.track(client);
    if (this.mode === 'hang') return; // read nothing, answer nothing
    const upstream = createConnection({ host: this.target.hostname, port: Number(this.target.port || 5432) });
    this.track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', close);
    upstream.on('close', close);
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => this.sockets.delete(socket));
  }
}
