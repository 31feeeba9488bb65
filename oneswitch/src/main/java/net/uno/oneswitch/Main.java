package net.uno.oneswitch;

/** Entry point of the OneSwitch jar. */
public final class Main {
  private Main() {}

  public static void main(String[] args) {
    System.out.println("oneswitch: not yet wired");
  }
}
