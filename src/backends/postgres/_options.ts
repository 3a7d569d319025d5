/**
 * The options of the PostgreSQL backend (private to the package).
 *
 * @module
 */

/** Options of {@link PostgresBackend}. */
export interface PostgresBackendOptions {
  /**
   * The PostgreSQL schema that holds the tables (created when absent): letters,
   * digits and `_`, at most 63 characters. Default `mcpstate`.
   */
  schema?: string;
  /**
   * Whether {@link PostgresBackend.close} also ends the client. Default
   * `false`: a client you pass in stays yours. {@link PostgresBackend.fromUrl}
   * sets it, since it opened the client.
   */
  closeClient?: boolean;
}
